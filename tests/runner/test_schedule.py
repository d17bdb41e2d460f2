"""Scheduled occurrences: cron in a named time zone across DST, materialised ahead of time, the
occurrence key making a second insert a no-op, and missed occurrences marked as such."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from actions import validation_registry
from actions.core import wait_action
from runner import catalog
from runner import definitions as defs
from runner.schedule import occurrences
from runner.schema import runs
from tests.support.definitions import cron, event, phase, wait
from tests.support.world import World


def quiz(**over: Any) -> defs.EventDefinition:
    spec = event(
        "quiz-night",
        phase("main", wait(60)),
        title="Quiz night",
        schedule=cron("0 20 * * FRI", "Europe/London"),
        grace_seconds=600,
    )
    spec.update(over)
    return defs.validate(spec, validation_registry())


def test_cron_keeps_local_time_across_a_dst_change() -> None:
    """20:00 London is 19:00 UTC in summer and 20:00 UTC in winter (clocks went back on
    2026-10-25); a hand parser working in UTC would drift by an hour."""
    found = list(occurrences(quiz(), dt.datetime(2026, 10, 15), dt.datetime(2026, 11, 4)))
    assert found == [
        dt.datetime(2026, 10, 16, 19),
        dt.datetime(2026, 10, 23, 19),
        dt.datetime(2026, 10, 30, 20),
    ]


def test_once_yields_its_instant_in_utc_only_inside_the_window() -> None:
    once = quiz(schedule={"once": "2026-12-05T19:00:00+01:00"})
    assert list(occurrences(once, dt.datetime(2026, 12, 1), dt.datetime(2026, 12, 6))) == [
        dt.datetime(2026, 12, 5, 18)
    ]
    assert list(occurrences(once, dt.datetime(2026, 12, 5, 18), dt.datetime(2026, 12, 6))) == []


async def count_runs(world: World) -> int:
    async with world.engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(runs))).scalar() or 0)


async def test_occurrences_are_materialised_ahead_and_only_once(world: World) -> None:
    world.register(wait_action(), owner="core")
    world.clock.set(dt.datetime(2026, 10, 15, 12))
    await catalog.publish(world.engine, quiz(scopes=["eu", "us"]), world.clock.now())
    report = await world.tick()
    assert report.materialised == 0, "the next Friday is more than a day away"

    world.clock.set(dt.datetime(2026, 10, 16, 9))
    report = await world.tick()
    assert report.materialised == 2, "one run per scope for Friday 20:00 London"
    async with world.engine.connect() as conn:
        rows = (await conn.execute(sa.select(runs.c.scope, runs.c.scheduled_for, runs.c.status))).all()
    assert sorted(rows) == [
        ("eu", dt.datetime(2026, 10, 16, 19), "scheduled"),
        ("us", dt.datetime(2026, 10, 16, 19), "scheduled"),
    ]

    # A fresh runner (restart) forgets nothing it needs: a second insert is a no-op.
    world.clock.set(dt.datetime(2026, 10, 16, 10))
    await world.set_definitions_materialised_until(None)
    await world.tick()
    assert await count_runs(world) == 2

    world.clock.set(dt.datetime(2026, 10, 16, 19, 0, 1))
    await world.tick()
    async with world.engine.connect() as conn:
        statuses = (await conn.execute(sa.select(runs.c.status))).scalars().all()
    assert statuses == ["running", "running"], "due occurrences start (their wait holds them running)"


async def test_an_occurrence_the_bot_was_down_for_is_marked_missed(world: World) -> None:
    world.clock.set(dt.datetime(2026, 10, 16, 9))
    await catalog.publish(world.engine, quiz(), world.clock.now())
    await world.tick()
    world.clock.set(dt.datetime(2026, 10, 16, 21))  # down from before 20:00 until 21:00; grace is 10 min
    report = await world.tick()
    assert report.missed == 1
    async with world.engine.connect() as conn:
        (status, error) = (await conn.execute(sa.select(runs.c.status, runs.c.last_error))).one()
    assert status == "missed" and "grace" in error
