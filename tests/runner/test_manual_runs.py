"""A manual start is no occurrence of the schedule (issue 9 part 6): it holds no occurrence key,
instead of dodging the key by moving ``scheduled_for`` a microsecond at a time, while the
schedule's own occurrences stay one run each, refused twice by the database itself."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from runner.history import Actor
from runner.schema import runs
from tests.support.definitions import cron, event
from tests.support.world import T0, World


async def test_a_live_start_and_a_rehearsal_in_one_microsecond_both_run_at_that_very_instant(
    world: World,
) -> None:
    """Before: the second start of the same instant was moved to ``now + 1 µs`` (and an eighth
    in one microsecond was refused as "those runs already exist"). Now each starts at ``now``
    exactly, with no occurrence key."""
    await world.publish(event("quiz"))
    live = await world.controls.start("quiz", actor=Actor(None, "mod"))
    rehearsals = [
        await world.controls.start("quiz", actor=Actor(None, "mod"), rehearsal=True) for _ in range(9)
    ]
    assert live.ok and all(r.ok for r in rehearsals)
    ids = [live.run_id, *(r.run_id for r in rehearsals)]
    async with world.engine.connect() as conn:
        rows = (await conn.execute(sa.select(runs.c.id, runs.c.scheduled_for, runs.c.occurrence_at))).all()
    assert sorted(rows) == sorted((run_id, T0, None) for run_id in ids)


async def test_a_manual_start_at_a_cron_instant_leaves_that_occurrence_to_the_schedule(world: World) -> None:
    """Before: a manual start at the very instant of an occurrence took the occurrence's key,
    so the schedule's own run of it was never created. Now both exist, and the schedule's run
    is still the only one holding the key (a second tick creates nothing)."""
    published = await world.publish(event("hourly", schedule=cron("0 * * * *")))
    assert (await world.controls.start("hourly", actor=Actor(None, "mod"), rehearsal=True)).ok
    await world.tick(T0)
    await world.tick(T0 + dt.timedelta(seconds=1))
    async with world.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(runs.c.started_by, runs.c.scheduled_for, runs.c.occurrence_at)
                .where(runs.c.definition_id == published.definition_id, runs.c.scheduled_for == T0)
                .order_by(runs.c.id)
            )
        ).all()
    assert [tuple(r) for r in rows] == [("mod", T0, None), ("schedule", T0, T0)]
