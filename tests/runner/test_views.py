"""What the front ends read: a run as it stands, and its history through the one reader."""

from __future__ import annotations

import sqlalchemy as sa

from runner import history, views
from runner.history import Actor
from runner.schema import run_log
from runner.sql.run_log import LogFollower
from tests.support.world import T0, World, phase, step


async def test_who_started_a_run_is_what_its_history_says(world: World) -> None:
    """``/event status`` and the staff log name the starter from the ``run.created`` line (the
    actor the history keeps), not from a copy of it in the runs table."""
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", step("test.noop"))])
    await world.set_run(run_id, started_by="someone else")

    view = await views.run_view(world.engine, run_id, world.controls.versions)
    assert view is not None and view.started_by == Actor(None, "seed")

    async with world.engine.begin() as conn:
        await conn.execute(sa.delete(run_log).where(run_log.c.run_id == run_id))
    view = await views.run_view(world.engine, run_id, world.controls.versions)
    assert view is not None and view.started_by == Actor(None, "someone else"), "its line is gone"


async def test_a_runs_history_reads_as_typed_entries_in_order(world: World) -> None:
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", step("test.noop"))])
    await world.tick(T0)

    entries = await views.log_for_run(world.engine, run_id)
    assert isinstance(entries[0].event, history.RunCreated) and entries[0].actor == Actor(None, "seed")
    moves = [(e.event.from_, e.event.to) for e in entries if isinstance(e.event, history.RunStatusChanged)]
    assert moves[0] == ("scheduled", "starting") and moves[-1] == ("ending", "completed")
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    after, more = await views.log_followed(world.engine, LogFollower(entries[0].id), limit=2)
    assert [e.id for e in after] == [e.id for e in entries[1:3]] and more
