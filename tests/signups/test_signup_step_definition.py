"""What a ``discord.signup`` step and a cue's ``ping: attendees`` need of the event: a
``signup:`` (and for the step a channel, its own or the sign-up's), each refusal naming the
phase and step; the step's channel checked against the config as an announcement's is."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actions import validation_registry
from runner.definitions import validate
from runner.errors import DefinitionError
from tests.support.definitions import announce, cue, event, phase, step
from wiring.config import load
from wiring.definition_checks import check_aliases, check_parsed

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "config.example.yaml"
NO_SIGNUP = None


def with_steps(*steps: dict[str, Any], signup: Any = NO_SIGNUP) -> dict[str, Any]:
    fields = {"signup": signup} if signup is not None else {}
    return event("raid", phase("main", announce("Hello"), *steps), **fields)


def problems_of(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        validate(spec, validation_registry())
    return [str(p) for p in caught.value.problems]


def test_a_signup_step_in_an_event_without_signup_is_refused_at_its_place() -> None:
    assert problems_of(with_steps(step("discord.signup", {"channel": "announcements"}))) == [
        "phase 'main', 2nd step, field 'action': discord.signup posts the run's sign-up message; "
        "this event has no signup:"
    ]


def test_a_signup_step_on_sign_ups_that_close_before_the_run_is_refused() -> None:
    """A step runs after the start: sign-ups closing at the start (or before) would post a
    message whose option buttons are disabled from birth."""
    for closes in ("start", "2h"):
        (problem,) = problems_of(
            with_steps(
                step("discord.signup", {"channel": "announcements"}),
                signup={"options": ["going"], "closes": closes},
            )
        )
        assert problem.startswith(
            "phase 'main', 2nd step, field 'action': discord.signup posts during the run"
        )
        assert "set signup.closes: end" in problem


def test_a_signup_step_with_no_channel_needs_the_sign_ups_channel() -> None:
    assert problems_of(
        with_steps(step("discord.signup"), signup={"options": ["going"], "closes": "end"})
    ) == [
        "phase 'main', 2nd step, field 'params.channel': no channel: the step names none and the "
        "event's signup: has no channel"
    ]
    validate(
        with_steps(
            step("discord.signup"), signup={"options": ["going"], "closes": "end", "channel": "announcements"}
        ),
        validation_registry(),
    )
    validate(
        with_steps(
            step("discord.signup", {"channel": "general"}), signup={"options": ["going"], "closes": "end"}
        ),
        validation_registry(),
    )


def test_a_signup_steps_content_is_checked_like_an_announcements() -> None:
    found = problems_of(
        with_steps(
            step("discord.signup", {"channel": "announcements", "content": "{nobody}"}),
            signup={"options": ["going"], "closes": "end"},
        )
    )
    assert len(found) == 1 and found[0].startswith("phase 'main', 2nd step, field 'params.content': ")


def test_a_cue_pinging_attendees_in_an_event_without_signup_is_refused_at_its_place() -> None:
    assert problems_of(with_steps(cue("Brief them", ping="attendees"))) == [
        "phase 'main', 2nd step, field 'params.ping': ping: attendees pings the run's sign-ups; "
        "this event has no signup:"
    ]
    validate(
        with_steps(
            cue("Brief them", ping="attendees"),
            signup={"options": ["going"], "closes": "end", "channel": "announcements"},
        ),
        validation_registry(),
    )


def test_a_cue_pings_attendees_and_nobody_else_by_name() -> None:
    (problem,) = problems_of(
        with_steps(
            cue("Brief them", ping="everyone"),
            signup={"options": ["going"], "closes": "end", "channel": "announcements"},
        )
    )
    assert problem.startswith("phase 'main', 2nd step, field 'params.ping': ")
    assert "attendees" in problem


def test_the_signup_steps_channel_is_checked_against_the_config() -> None:
    config = load(EXAMPLE_CONFIG)
    specs = {
        "own.yaml": with_steps(
            step("discord.signup", {"channel": "warbands"}), signup={"options": ["going"], "closes": "end"}
        ),
        "signups.yaml": with_steps(
            step("discord.signup"), signup={"options": ["going"], "closes": "end", "channel": "warbands"}
        ),
    }
    checked = [check_parsed(name, spec, validation_registry()) for name, spec in specs.items()]
    assert all(item.valid for item in checked)
    asyncio.run(check_aliases(checked, config))
    own, from_signup = ([str(p) for p in item.problems] for item in checked)
    assert any(
        line.startswith(
            "own.yaml, phase 'main', 2nd step, field 'params.channel': channel 'warbands' is not one of the channel aliases"
        )
        for line in own
    ), own
    assert any(
        line.startswith(
            "signups.yaml, phase 'main', 2nd step, field 'params.channel': channel 'warbands' is not one of the channel aliases"
        )
        for line in from_signup
    ), from_signup
