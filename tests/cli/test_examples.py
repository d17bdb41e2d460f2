"""The bundled examples are the ones the issue describes, and they fit the example config."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actions import validation_registry
from runner.definitions import CronSchedule, EventDefinition, ManualSchedule, StepDefinition, load_file
from tests.cli.conftest import EXAMPLE_CONFIG, EXAMPLE_FILES, EXAMPLES
from wiring.config import load


def example(name: str) -> EventDefinition:
    return load_file(EXAMPLES / name, validation_registry())


def steps(definition: EventDefinition) -> Iterator[StepDefinition]:
    for phase in definition.phases:
        yield from phase.steps


def test_the_invasion_fans_out_over_worlds_with_a_key_per_world() -> None:
    invasion = example("invasion.yaml")
    assert len(invasion.scopes) >= 3
    assert invasion.concurrency_key == "invasion:{scope}"
    assert {invasion.concurrency_key_for(s) for s in invasion.scopes} == {
        f"invasion:{s}" for s in invasion.scopes
    }
    opening, *_, closing = invasion.phases
    herald = opening.steps[0]
    assert herald.action == "discord.announce"
    assert herald.params["content"] and herald.params["ping_role"] and herald.params["embed"]["fields"]
    actions = [s.action for s in steps(invasion)]
    assert "core.wait" in actions and "gm.cue" in actions
    assert closing.key == "closing"


def test_quiz_night_is_a_weekly_cron_in_a_named_time_zone_with_a_grace_window() -> None:
    quiz = example("quiz-night.yaml")
    assert isinstance(quiz.schedule, CronSchedule)
    assert quiz.schedule.cron == "0 20 * * FRI"
    assert quiz.schedule.timezone == "Europe/London"
    assert quiz.grace_seconds == 1800


def test_the_treasure_hunt_is_a_small_manual_event() -> None:
    hunt = example("treasure-hunt.yaml")
    assert isinstance(hunt.schedule, ManualSchedule)
    assert len(hunt.phases) == 1 and len(list(steps(hunt))) <= 6


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_channel_and_ping_an_example_uses_is_in_the_example_config(path: object) -> None:
    """An example copied next to config.example.yaml must work as it is: its channels exist and
    its announcement pings are allowed."""
    config = load(EXAMPLE_CONFIG, {})
    for step in steps(load_file(path, validation_registry())):  # type: ignore[arg-type]
        channel = step.params.get("channel")
        if channel is not None:
            assert config.channel_id(channel) is not None, f"{path}: channel {channel!r}"
        role = step.params.get("ping_role")
        if role is not None:
            assert role in config.roles, f"{path}: role {role!r}"
            if step.action == "discord.announce":
                assert role in config.announce.allowed_ping_roles, f"{path}: {role!r} would not ping"
