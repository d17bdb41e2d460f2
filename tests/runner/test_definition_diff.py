"""``runner.definitions.diff.changes``: what a new version changes, one kind of change per test,
each asserting the exact line a moderator reads under ``/event publish``'s preview."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from actions import validation_registry
from runner.definitions import EventDefinition, validate
from runner.definitions.diff import changes
from tests.support.definitions import announce, cron, cue, event, phase, wait


def base() -> dict[str, Any]:
    return event(
        "raid",
        phase(
            "muster",
            announce("The raid begins!", label="Call to arms"),
            cue("Open the gates.", label="Open the gates"),
            wait(60),
            label="Muster",
        ),
        phase("finale", announce("The harbour is ours!", label="Victory"), label="Finale"),
        title="Harbour Raid",
        schedule=cron("0 20 * * FRI", "Europe/London"),
        scopes=["north", "south"],
        reminders=[{"before": "1h", "channel": "announcements", "content": "In an hour!"}],
    )


def built(raw: dict[str, Any]) -> EventDefinition:
    return validate(raw, validation_registry())


def diff(edit: Any) -> list[str]:
    """The lines for ``base()`` changed by ``edit`` (which edits a deep copy in place)."""
    raw = copy.deepcopy(base())
    edit(raw)
    return changes(built(base()), built(raw))


def test_identical_versions_have_no_changes() -> None:
    assert changes(built(base()), built(base())) == []


def test_title_and_schedule_are_shown_before_and_after() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["title"] = "Harbour Assault"
        raw["schedule"] = cron("30 19 * * SAT", "Europe/Berlin")

    assert diff(edit) == [
        "title: 'Harbour Raid' → 'Harbour Assault'",
        "schedule: cron '0 20 * * FRI' in Europe/London → cron '30 19 * * SAT' in Europe/Berlin",
    ]


def test_a_schedule_made_manual_drops_its_reminders_too() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["schedule"] = "manual"
        raw["reminders"] = []

    assert diff(edit) == [
        "schedule: cron '0 20 * * FRI' in Europe/London → manual",
        "reminder 1h before: removed",
    ]


def test_grace_and_duration_read_as_durations() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["grace_seconds"] = 1800
        raw["duration"] = "1h30m"

    assert diff(edit) == ["grace_seconds: 15m → 30m", "duration: none → 1h30m"]


def test_description_scopes_and_the_listing() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["description"] = "Bring a boat."
        raw["scopes"] = ["north", "east"]
        raw["discord_event"] = False

    assert diff(edit) == [
        "discord_event: as the config says → not listed",
        "description: changed",
        "scopes added: east",
        "scopes removed: south",
    ]


def test_reminders_added_changed_and_removed_by_their_lead_time() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["reminders"] = [
            {"before": "15m", "channel": "announcements", "content": "Soon!"},
            {"before": "2h", "channel": "announcements", "content": "In two hours."},
        ]

    assert diff(edit) == [
        "reminder 15m before: added",
        "reminder 2h before: added",
        "reminder 1h before: removed",
    ]

    def reword(raw: dict[str, Any]) -> None:
        raw["reminders"][0]["content"] = "In sixty minutes!"
        raw["reminders"][0]["ping_role"] = "players"

    assert diff(reword) == ["reminder 1h before: content changed; ping_role added"]


def test_phases_added_and_removed_with_their_steps() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["phases"][1] = phase("battle", wait(30), announce("Charge!"), label="The battle")

    assert diff(edit) == [
        "phase 'battle' (The battle): added, with 2 steps",
        "phase 'finale' (Finale): removed, with its 1 step",
    ]


def test_a_phase_relabelled_and_phases_reordered() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["phases"].reverse()
        raw["phases"][0]["label"] = "The end"

    assert diff(edit) == [
        "phase 'finale': label 'Finale' → 'The end'",
        "phases reordered: muster, finale → finale, muster",
    ]


def test_steps_added_removed_and_changed_by_label() -> None:
    def edit(raw: dict[str, Any]) -> None:
        steps = raw["phases"][0]["steps"]
        steps[0]["params"]["content"] = "To the boats!"
        steps[0]["params"]["channel"] = "general"
        steps[0]["on_failure"] = "abort_run"
        del steps[1]
        steps.insert(1, cue("Lower the bridge.", label="Lower the bridge"))

    assert diff(edit) == [
        "phase 'muster': step 'Call to arms': channel, content changed; on_failure pause → abort_run",
        "phase 'muster': step 'Lower the bridge': added (gm.cue)",
        "phase 'muster': step 'Open the gates': removed",
    ]


def test_a_step_that_becomes_another_action_says_so() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["phases"][1]["steps"][0] = cue("Announce the victory.", label="Victory")

    assert diff(edit) == [
        "phase 'finale': step 'Victory': action discord.announce → gm.cue; instructions added; "
        "channel, content removed"
    ]


def test_unlabelled_steps_are_matched_by_action_and_named_for_it() -> None:
    def edit(raw: dict[str, Any]) -> None:
        steps = raw["phases"][0]["steps"]
        steps[2]["params"]["duration"] = 90
        steps.append(wait(10))

    assert diff(edit) == [
        "phase 'muster': the first unlabelled core.wait step: duration changed",
        "phase 'muster': the second unlabelled core.wait step: added",
    ]


def test_steps_reordered_within_a_phase() -> None:
    def edit(raw: dict[str, Any]) -> None:
        steps = raw["phases"][0]["steps"]
        steps[0], steps[1] = steps[1], steps[0]

    assert diff(edit) == ["phase 'muster': steps reordered"]


@pytest.mark.parametrize("field", ["concurrency_key", "key"])
def test_any_other_field_of_the_event_gets_a_line(field: str) -> None:
    """A field with no words of its own still shows, before and after, so a publish never
    changes something the preview left out."""

    def edit(raw: dict[str, Any]) -> None:
        raw[field] = "harbour"

    before = {"concurrency_key": "none", "key": "'raid'"}[field]
    assert diff(edit) == [f"{field}: {before} → 'harbour'"]
