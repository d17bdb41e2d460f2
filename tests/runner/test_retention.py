"""Retention: the run log and steps of runs that ended longer ago than the period are pruned in
small batches, each run keeping its row and a summary; nothing else is touched, cursor readers
keep reading, and a due step never waits behind a prune. On SQLite and MariaDB."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.live import LiveMessages, live_view
from runner import history, views
from runner.engine import RunnerSettings
from runner.history import Actor
from runner.registry import Envelope
from runner.schema import definitions, run_log, run_summaries, steps
from tests.support.actions import build_action
from tests.support.definitions import event
from tests.support.world import T0, World, phase, step

DAY = 86400.0
KEEP = dt.timedelta(days=30)
SEED = Actor(None, "seed")
ALICE = Actor("42", "Alice")
BOB = Actor("7", "Bob")


def _settings(batch: int = 500, keep: float = 30 * DAY) -> RunnerSettings:
    return RunnerSettings(keep_run_log_seconds=keep, retention_batch=batch)


async def _world(engine: AsyncEngine, batch: int = 500, keep: float = 30 * DAY) -> World:
    world = World(engine, settings=_settings(batch, keep))
    world.register(world.scripted.action("test.noop"), world.scripted.action("test.park"))
    world.scripted["test.park"].answer = {"ok": True, "await": "human"}
    return world


async def _start(world: World, key: str, *actions: str, actor: Actor = SEED) -> int:
    """Publish ``key`` (once) and start it now; tick so it runs as far as it can."""
    async with world.engine.connect() as conn:
        published = (await conn.execute(sa.select(definitions.c.id).where(definitions.c.key == key))).first()
    if published is None:
        await world.publish(event(key, phase("main", *map(step, actions))))
    started = await world.controls.start(key, actor=actor)
    assert started.ok, started.message
    await world.runner.tick()
    return started.run_ids[0]


async def _counts(engine: AsyncEngine, run_id: int) -> tuple[int, int]:
    async with engine.connect() as conn:
        lines = (await conn.execute(sa.select(sa.func.count()).where(run_log.c.run_id == run_id))).scalar()
        rows = (await conn.execute(sa.select(sa.func.count()).where(steps.c.run_id == run_id))).scalar()
    return int(lines or 0), int(rows or 0)


async def _prune_all(world: World, cutoff: dt.datetime) -> int:
    passes = 0
    while True:
        passes += 1
        done = await world.runner.prune_pass(cutoff)
        if done.summarised == 0 and done.rows == 0 and done.finished == 0:
            return passes
        assert passes < 500, "pruning never finished"


async def test_an_old_ended_run_loses_its_history_and_keeps_who_started_it_how_it_ended_and_when(
    engine: AsyncEngine,
) -> None:
    """Runs ended before the period lose their log lines and steps and keep a summary the views
    read; a run ended within the period and a run still in flight are left exactly as they were."""
    world = await _world(engine)
    world.clock.set(T0)
    completed = await _start(world, "old", "test.noop", "test.noop", actor=ALICE)
    cancelled = await _start(world, "rained", "test.park")
    assert (await world.controls.cancel(cancelled, reason="rained off", actor=BOB)).ok
    in_flight = await _start(world, "forever", "test.park", actor=ALICE)
    world.clock.set(T0 + dt.timedelta(days=20))
    young = await _start(world, "young", "test.noop")
    assert (await world.run(completed))["status"] == "completed"
    kept_before = {run_id: await _counts(engine, run_id) for run_id in (in_flight, young)}
    assert all(lines > 0 and rows > 0 for lines, rows in kept_before.values())
    completed_lines = (await _counts(engine, completed))[0]

    report = await world.tick(T0 + KEEP + dt.timedelta(days=1))

    assert report.pruned > 0 and not report.errors
    for run_id in (completed, cancelled):
        assert await _counts(engine, run_id) == (0, 0), f"run {run_id} ended 31 days ago: pruned"
    for run_id, counts in kept_before.items():
        assert await _counts(engine, run_id) == counts, f"run {run_id} must be untouched"
    view = await views.run_view(engine, completed, world.runner.versions)
    assert view is not None and view.pruned is not None
    assert (view.status, view.started_at, view.ended_at) == ("completed", T0, T0)
    assert view.started_by == ALICE, "who started it, with the id a front end mentions"
    assert view.pruned.steps == {"done": 2} and view.pruned.done
    assert view.pruned.log_lines == completed_lines
    assert view.phases == [], "no step is shown as 'not reached' once the steps are gone"
    async with engine.connect() as conn:
        ending = await history.how_run_ended(conn, cancelled, "cancelled", None)
    assert ending.by == BOB and ending.why == "rained off"
    live = await live_view(engine, cancelled, world.runner.versions, world.clock.now())
    assert live is not None and live.ending is not None and live.ending.by == BOB
    listed = {r.id: r.status for r in await views.list_runs(engine, limit=10)}
    assert listed == {
        completed: "completed",
        cancelled: "cancelled",
        in_flight: "running",
        young: "completed",
    }
    untouched = await views.run_view(engine, young, world.runner.versions)
    assert untouched is not None and untouched.pruned is None and untouched.phases


async def test_retention_off_prunes_nothing(engine: AsyncEngine) -> None:
    world = await _world(engine, keep=0)
    run_id = await _start(world, "old", "test.noop")
    before = await _counts(engine, run_id)
    report = await world.tick(T0 + dt.timedelta(days=400))
    assert report.pruned == 0 and await _counts(engine, run_id) == before


async def test_each_pass_is_a_bounded_batch_of_short_statements(engine: AsyncEngine) -> None:
    """A backlog is spread over passes: no DELETE removes more than the batch, a pass runs a
    bounded number of statements, and every old run is pruned in the end."""
    batch = 10
    world = await _world(engine, batch=batch)
    old = [await _start(world, "old", "test.noop", "test.noop", "test.noop") for _ in range(6)]
    world.clock.set(T0 + dt.timedelta(days=40))
    young = await _start(world, "young", "test.noop")
    statements: list[tuple[str, int]] = []

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append((statement, cursor.rowcount))

    sa.event.listen(engine.sync_engine, "after_cursor_execute", after)
    passes = []
    try:
        while True:
            statements.clear()
            done = await world.runner.prune_pass(T0 + dt.timedelta(days=1))
            passes.append((done, list(statements)))
            if done.summarised == 0 and done.rows == 0 and done.finished == 0:
                break
            assert len(passes) < 100
    finally:
        sa.event.remove(engine.sync_engine, "after_cursor_execute", after)
    deletes = [n for _, stmts in passes for text, n in stmts if text.lstrip().upper().startswith("DELETE")]
    assert deletes and max(deletes) <= batch, "no statement deletes more than a batch"
    # 19: the cleanup ledger's entries are one more table a pass deletes from (issue 29).
    assert max(len(stmts) for _, stmts in passes) <= 19, "a pass is a handful of statements"
    assert max(done.rows for done, _ in passes) <= 5 * batch
    assert len(passes) > 5, "a backlog larger than a batch takes several passes"
    for run_id in old:
        assert await _counts(engine, run_id) == (0, 0)
    assert (await _counts(engine, young))[0] > 0
    async with engine.connect() as conn:
        summaries = (await conn.execute(sa.select(run_summaries.c.run_id, run_summaries.c.pruned_at))).all()
    assert sorted(r.run_id for r in summaries) == old and all(r.pruned_at is not None for r in summaries)


async def test_a_cursor_reader_reads_every_line_written_after_a_prune_that_took_the_newest_run(
    engine: AsyncEngine,
) -> None:
    """Readers that follow the log by id (the staff log, the live messages) hold a floor at the
    newest line. Pruning the run that wrote it must not let a new line take an id at or below
    that cursor (SQLite numbers a new row one past the largest id left), or the reader would
    skip it: the newest line of the table is kept."""
    world = await _world(engine)
    old = await _start(world, "old", "test.noop", "test.noop")
    follower = await views.follow_log_from_now(engine)
    live = LiveMessages(engine, "test")
    live_follower = await live.follow_from_now()
    cursor = follower.floor
    old_step_ids = [s["id"] for s in await world.steps_of(old)]
    world.clock.set(T0 + dt.timedelta(days=40))
    await _prune_all(world, T0 + dt.timedelta(days=1))

    new = await _start(world, "new", "test.noop")

    fed, _more = await views.log_followed(engine, follower)
    assert fed and {entry.run_id for entry in fed} == {new} and fed[0].kind == "run.created"
    assert all(entry.id > cursor for entry in fed)
    changes = await live.changes(live_follower)
    assert changes.run_ids == [new]
    assert min(s["id"] for s in await world.steps_of(new)) > max(old_step_ids), (
        "a new step never takes a pruned step's id (a stale cue button names step ids)"
    )
    remaining = await world.log(old)
    assert [line["id"] for line in remaining] == [cursor], "only the table's newest line is kept"


async def test_a_due_step_is_dispatched_before_the_prune_in_its_tick_while_a_backlog_waits(
    engine: AsyncEngine,
) -> None:
    """With a backlog far larger than a batch, the tick that finds a step due dispatches it
    first (virtual lateness 0) and prunes one bounded batch after it; the backlog waits."""
    batch = 20
    world = await _world(engine, batch=batch)
    for _ in range(12):
        await _start(world, "old", "test.noop", "test.noop", "test.noop")
    events: list[str] = []
    dispatched_at: list[dt.datetime] = []

    async def record(envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        events.append("dispatch")
        dispatched_at.append(world.clock.now())
        return {"ok": True}

    world.register(build_action("test.record", record))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 60}
    world.register(world.scripted.action("test.wait"))
    world.clock.set(T0 + dt.timedelta(days=40))
    due_run = await _start(world, "due", "test.wait", "test.record")
    due_at = (await world.steps_of(due_run))[1]["due_at"]
    assert due_at == world.clock.now() + dt.timedelta(seconds=60)

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            events.append("delete")

    sa.event.listen(engine.sync_engine, "after_cursor_execute", after)
    try:
        report = await world.tick(due_at)
    finally:
        sa.event.remove(engine.sync_engine, "after_cursor_execute", after)

    assert dispatched_at == [due_at], "dispatched in the tick that found it due"
    assert events[0] == "dispatch" and "delete" in events, "the prune ran in the same tick, after it"
    assert 0 < report.pruned <= 4 * batch
    async with engine.connect() as conn:
        summarised = (await conn.execute(sa.select(sa.func.count()).select_from(run_summaries))).scalar()
        pending = (
            await conn.execute(sa.select(sa.func.count()).where(run_summaries.c.pruned_at.is_(None)))
        ).scalar()
    assert summarised and pending, "the backlog is still there: one batch per pass"


@pytest.mark.parametrize("status", ["running"])
async def test_an_open_step_of_an_ended_run_is_left_alone(engine: AsyncEngine, status: str) -> None:
    """Retention judges runs, not steps: a step still open (leased) under an ended run is the
    reclaim's to settle, so it stays and the rest of the run is pruned."""
    world = await _world(engine)
    run_id = await _start(world, "old", "test.noop", "test.noop")
    first = (await world.steps_of(run_id))[0]["id"]
    await world.set_step(first, status=status, claim_expires_at=T0 + dt.timedelta(days=60))
    world.clock.set(T0 + dt.timedelta(days=40))
    await _start(world, "young", "test.noop")
    await _prune_all(world, T0 + dt.timedelta(days=1))
    assert [s["id"] for s in await world.steps_of(run_id)] == [first]
    assert await world.log(run_id) == []
