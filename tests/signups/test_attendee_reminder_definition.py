"""A reminder written ``to: attendees`` (issue 28, item 5): a DM to each seated member instead of
a channel message. Its fields are checked as a DM's (``content`` only), it needs ``signup:``
(whom else would it reach), it is a reminder's alone (not a step), every problem is located at
``reminders.N.field``, and a version whose reminders have no ``to`` hashes exactly as it did
before ``to`` existed (so publishing it again is not a new version)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actions import validation_registry
from runner.definitions import ATTENDEE_REMINDER_ACTION, EventDefinition, validate
from runner.errors import DefinitionError
from tests.support.definitions import cron, event, phase, step, wait

SIGNUP = {"options": ["going"], "channel": "announcements"}


def reminded(*reminders: dict[str, Any], **fields: Any) -> dict[str, Any]:
    spec = event("raid", phase("main", wait("1m")), schedule=cron("0 20 * * FRI"), reminders=list(reminders))
    spec.update({"signup": SIGNUP, **fields})
    return {key: value for key, value in spec.items() if value is not None}


def problems_of(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        validate(spec, validation_registry())
    return [str(p) for p in caught.value.problems]


def test_a_reminder_to_attendees_is_a_dm_action_with_its_content_only() -> None:
    definition = validate(
        reminded({"before": "1h", "to": "attendees", "content": "{title} starts {start_relative}"}),
        validation_registry(),
    )
    [reminder] = definition.reminders
    assert reminder.to == "attendees"
    assert reminder.params == {"content": "{title} starts {start_relative}"}


@pytest.mark.parametrize(
    ("reminder", "said"),
    [
        (
            {"before": "1h", "to": "attendees", "content": "hi", "channel": "announcements"},
            "'reminders.0.channel': unknown field 'channel'",
        ),
        ({"before": "1h", "to": "attendees"}, "'reminders.0.content'"),
        ({"before": "1h", "to": "everyone", "content": "hi"}, "'reminders.0.to'"),
        ({"before": "1h", "to": "attendees", "content": "{nope}"}, "'reminders.0.content'"),
    ],
)
def test_every_problem_of_a_dm_reminder_names_its_place(reminder: dict[str, Any], said: str) -> None:
    found = problems_of(reminded(reminder))
    assert any(said in line for line in found), found


def test_a_reminder_to_attendees_needs_a_signup() -> None:
    found = problems_of(reminded({"before": "1h", "to": "attendees", "content": "hi"}, signup=None))
    assert any("'reminders.0.to'" in line and "no signup:" in line for line in found), found


def test_the_dm_action_is_refused_as_a_step() -> None:
    """Its DMs are dropped once the run starts (they say "starts in ..."): as a step it would
    never be sent, so it is refused where it is written."""
    spec = reminded()
    spec["phases"] = [phase("main", step(ATTENDEE_REMINDER_ACTION, {"content": "hi"}))]
    found = problems_of(spec)
    assert any("write it under reminders: with to: attendees" in line for line in found), found


def test_a_version_whose_reminders_have_no_to_hashes_as_before_to_existed() -> None:
    """What was stored before ``to`` (its canonical JSON has no such key) reads back to the very
    same JSON and hash: republishing the same file is "unchanged", not a new version."""
    channel = {"before": "1h", "channel": "announcements", "content": "soon"}
    definition = validate(reminded(channel), validation_registry())
    stored = definition.canonical_json()
    assert '"to"' not in stored
    again = EventDefinition.model_validate(json.loads(stored))
    assert again.canonical_json() == stored and again.content_hash() == definition.content_hash()
    with_dm = validate(
        reminded(channel, {"before": "2h", "to": "attendees", "content": "hi"}), validation_registry()
    )
    assert '"to":"attendees"' in with_dm.canonical_json()
