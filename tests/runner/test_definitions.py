"""Definitions: validation that names file, phase, step and field; publishing immutable
versions; identical content a no-op; an invalid definition never stored."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from runner import catalog
from runner import definitions as defs
from runner.errors import DefinitionError
from runner.history import Actor
from runner.schema import definitions, runs, versions
from tests.support.definitions import announce, cue, event, phase, wait
from tests.support.world import T0


def valid(**over: Any) -> dict[str, Any]:
    spec = event(
        "raid-night",
        phase("opening", announce("Raid at 8!"), wait("5m")),
        phase("boss", cue("Spawn it")),
        title="Raid night",
    )
    spec.update(over)
    return spec


def problems(spec: Any) -> list[Any]:
    with pytest.raises(DefinitionError) as raised:
        defs.validate(spec, validation_registry(), file="events/raid.yaml")
    return raised.value.problems


def test_a_valid_definition_validates_with_defaults() -> None:
    definition = defs.validate(valid(), validation_registry(), file="x.yaml")
    assert definition.grace_seconds == 900
    assert definition.run_scopes() == [""]
    assert definition.phases[0].steps[0].on_failure == "pause", "the safe default"
    assert definition.schedule.kind == "manual"


def test_an_unknown_action_is_named_with_its_phase_and_step() -> None:
    spec = valid()
    spec["phases"][1]["steps"][0]["action"] = "gm.cu"
    [problem] = problems(spec)
    assert (problem.file, problem.phase, problem.step, problem.field) == (
        "events/raid.yaml",
        "boss",
        0,
        "action",
    )
    assert "gm.cu" in problem.message


def test_bad_params_are_checked_against_the_actions_params_model() -> None:
    spec = valid()
    spec["phases"][0]["steps"][1]["params"] = {"duration": "soon"}
    spec["phases"][0]["steps"][0]["params"] = {"channel": "announcements"}
    found = problems(spec)
    assert {(p.phase, p.step, p.field) for p in found} == {
        ("opening", 1, "params.duration"),
        ("opening", 0, "params"),
    }
    assert all("events/raid.yaml" in str(p) and "phase 'opening'" in str(p) for p in found)


def test_discord_limits_are_refused_at_validation_naming_the_step() -> None:
    spec = valid()
    spec["phases"][0]["steps"][0]["params"] = {"channel": "announcements", "content": "x" * 2001}
    [problem] = problems(spec)
    assert (problem.phase, problem.step, problem.field) == ("opening", 0, "params.content")


def test_scope_substitution_is_checked_against_the_limits_per_scope() -> None:
    long_scope = "w" * 150
    spec = valid(scopes=[long_scope])
    spec["phases"][0]["steps"][0]["params"] = {"channel": "announcements", "content": "{scope}" * 30}
    [problem] = problems(spec)
    assert problem.field == "params.content"
    assert "scope" in problem.message


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"schedule": {"cron": "61 * * * *", "timezone": "Europe/Berlin"}}, "schedule.cron"),
        ({"schedule": {"cron": "0 20 * * FRI", "timezone": "Mars/Olympus"}}, "schedule.timezone"),
        ({"schedule": {"once": "2026-12-01T20:00:00"}}, "schedule.once"),
        ({"concurrency_key": "invasion:{world}"}, "concurrency_key"),
        ({"scopes": ["a", "a"]}, "scopes"),
        ({"key": "Not A Key"}, "key"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_top_level_problems_name_their_field(change: dict[str, Any], field: str) -> None:
    found = problems(valid(**change))
    assert field in {p.field for p in found}, [str(p) for p in found]


def test_duplicate_phase_keys_are_refused() -> None:
    spec = valid()
    spec["phases"][1]["key"] = "opening"
    [problem] = problems(spec)
    assert (problem.file, problem.phase, problem.field) == ("events/raid.yaml", "opening", "key")
    assert "earlier phase" in problem.message


def test_every_problem_is_reported_at_once() -> None:
    spec = valid(grace_seconds=-5)
    spec["phases"][0]["steps"][0]["action"] = "nope.nope"
    spec["phases"][1]["steps"][0]["params"] = {}
    found = problems(spec)
    assert {p.field for p in found} >= {"grace_seconds", "action", "params.instructions"}


def test_yaml_syntax_errors_name_the_file_and_line() -> None:
    with pytest.raises(DefinitionError) as raised:
        defs.parse_yaml("key: a\nphases: [\n  - oops: {\n", file="broken.yaml")
    text = str(raised.value)
    assert "broken.yaml" in text and "line" in text


def test_cron_schedules_accept_the_shorthand_form() -> None:
    definition = defs.validate(
        valid(schedule={"cron": "0 20 * * FRI", "timezone": "Europe/London"}), validation_registry()
    )
    assert definition.schedule.kind == "cron"


async def test_publishing_stores_an_immutable_version_and_identical_content_is_a_noop(
    engine: AsyncEngine,
) -> None:
    definition = defs.validate(valid(), validation_registry())
    first = await catalog.publish(engine, definition, T0, source="raid.yaml", actor=Actor(None, "alice"))
    again = await catalog.publish(engine, definition, T0, source="raid.yaml", actor=Actor(None, "alice"))
    assert first.changed and not again.changed
    assert (first.version_id, first.version) == (again.version_id, 1)

    changed = defs.validate(valid(title="Raid night!"), validation_registry())
    second = await catalog.publish(engine, changed, T0)
    assert (second.changed, second.version) == (True, 2)
    async with engine.connect() as conn:
        stored = (await conn.execute(sa.select(versions.c.spec).order_by(versions.c.id))).scalars().all()
        current = (await conn.execute(sa.select(definitions.c.current_version_id))).scalar()
    assert [s["title"] for s in stored] == ["Raid night", "Raid night!"], "the old version is untouched"
    assert current == second.version_id


async def test_a_run_pins_the_version_it_was_created_from(engine: AsyncEngine) -> None:
    from runner.clock import ManualClock
    from runner.controls import Controls

    clock = ManualClock(T0)
    await catalog.publish(engine, defs.validate(valid(), validation_registry()), T0)
    controls = Controls(engine, clock=clock)
    started = await controls.start("raid-night", actor=Actor(None, "alice"))
    await catalog.publish(engine, defs.validate(valid(title="v2"), validation_registry()), T0)
    async with engine.connect() as conn:
        pinned = (
            await conn.execute(sa.select(runs.c.version_id).where(runs.c.id == started.run_id))
        ).scalar()
        first_version = (await conn.execute(sa.select(versions.c.id).where(versions.c.version == 1))).scalar()
    assert pinned == first_version


async def test_an_invalid_definition_is_never_stored(engine: AsyncEngine) -> None:
    with pytest.raises(DefinitionError):
        defs.validate(valid(grace_seconds=-1), validation_registry())
    async with engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(definitions))).scalar() == 0
