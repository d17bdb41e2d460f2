"""Process heartbeats and the health view (``runner.heartbeat``, ``runner.views.health``), on
both backends: who is alive and late, what each holds, the runs not well, the runs due that
nobody picked up, and a database that cannot be reached or is behind its schema."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.clock import ManualClock
from runner.db import create_engine
from runner.heartbeat import BEAT_SLACK, PRUNE_AFTER, Heartbeat, dead_after
from runner.loop import RunnerLoop
from runner.schema import processes
from runner.views import health
from runner.views.health import HeldStep, overdue_after
from tests.support.world import T0, World, phase, step

INTERVAL = 5.0


async def _rows(engine: AsyncEngine) -> list[sa.RowMapping]:
    async with engine.connect() as conn:
        return list((await conn.execute(sa.select(processes).order_by(processes.c.owner))).mappings().all())


def _heartbeat(world: World, owner: str = "host:test", clock: ManualClock | None = None) -> Heartbeat:
    return Heartbeat(world.engine, owner, clock or world.clock, interval=INTERVAL, host="box", pid=42)


async def _cue_run(world: World) -> int:
    """A run with two steps; the tests set its lease, health and wake by hand."""
    return await world.seed_run([phase("main", step("test.cue"), step("test.noop"))])


async def test_a_heartbeat_is_written_at_most_once_per_interval_and_deleted_on_close(world: World) -> None:
    beat = _heartbeat(world)
    assert await beat.beat()
    (row,) = await _rows(world.engine)
    assert (row["owner"], row["host"], row["pid"], row["interval_ms"]) == ("host:test", "box", 42, 5000)
    assert row["started_at"] == row["last_seen"] == T0
    assert row["last_tick_at"] is None and row["tick_lag_ms"] is None, "no tick yet: nothing to say"

    almost = INTERVAL * (1 - BEAT_SLACK)
    world.clock.advance(almost - 0.01)
    assert not await beat.beat(), "within the interval: no write"
    assert (await _rows(world.engine))[0]["last_seen"] == T0
    world.clock.advance(0.01)
    assert await beat.beat(), "an idle loop's tick a moment early still beats"
    assert (await _rows(world.engine))[0]["last_seen"] == T0 + dt.timedelta(seconds=almost)
    assert beat.beats == 2

    await beat.stop()
    assert await _rows(world.engine) == []
    world.clock.advance(60)
    assert not await beat.beat(), "nothing is written after a clean close"
    assert await _rows(world.engine) == []


async def test_the_first_beat_prunes_processes_gone_for_a_day(world: World) -> None:
    old = _heartbeat(world, "gone:1")
    assert await old.beat()
    recent_clock = ManualClock(T0 + PRUNE_AFTER - dt.timedelta(minutes=1))
    recent = _heartbeat(world, "recent:2", recent_clock)
    assert await recent.beat()
    world.clock.set(T0 + PRUNE_AFTER + dt.timedelta(seconds=1))
    assert await _heartbeat(world, "new:3").beat()
    assert [r["owner"] for r in await _rows(world.engine)] == ["new:3", "recent:2"]


async def test_the_loop_records_how_late_each_tick_ran_and_how_long_it_took(world: World) -> None:
    """Tick lag is measured from the moment the loop meant to tick (the end of the last tick plus
    the sleep it chose), so a tick 7 s late on a 5 s interval says 7000 ms; a nudged tick, which
    runs early, is never late."""
    beat = _heartbeat(world)
    loop = RunnerLoop(world.runner, interval=INTERVAL, heartbeat=beat)
    delay = await loop.run_once()
    assert delay == INTERVAL, "nothing to do: the interval"
    (row,) = await _rows(world.engine)
    assert (row["last_tick_at"], row["tick_lag_ms"], row["tick_ms"]) == (T0, 0, 0)

    world.clock.advance(INTERVAL + 7)
    await loop.run_once()
    (row,) = await _rows(world.engine)
    assert row["last_tick_at"] == T0 + dt.timedelta(seconds=INTERVAL + 7)
    assert row["tick_lag_ms"] == 7000

    world.clock.advance(1)
    await loop.run_once()  # nudged: early, and within the interval, so no write
    world.clock.advance(INTERVAL)
    await loop.run_once()
    (row,) = await _rows(world.engine)
    assert row["tick_lag_ms"] == 0, "the worst of the ticks since the last beat: none was late"


async def test_a_healthy_database_with_a_live_process(world: World) -> None:
    beat = _heartbeat(world)
    await beat.beat()
    report = await health(world.engine, world.clock.now(), interval_seconds=INTERVAL)
    assert report.database.reachable and report.database.schema_current
    assert report.database.latency_ms is not None and 0 < report.database.latency_ms < 5000
    assert report.database.backend == world.engine.url.get_backend_name()
    (process,) = report.processes
    assert (process.owner, process.alive, process.lagging, process.runs, process.steps) == (
        "host:test",
        True,
        False,
        [],
        [],
    )
    assert report.problems == [] and report.warnings == [] and report.healthy


async def test_each_process_lists_the_runs_and_steps_it_holds_and_strangers_are_listed_apart(
    world: World,
) -> None:
    """Only live leases count: a parked cue, an expired lease and a released run are nobody's."""
    await _heartbeat(world).beat()
    now = world.clock.now()
    held = await _cue_run(world)
    stepped = await _cue_run(world)
    parked = await _cue_run(world)
    expired = await _cue_run(world)
    lease = now + dt.timedelta(seconds=60)
    await world.set_run(held, claimed_by="host:test", claim_expires_at=lease)
    (step_row, _) = await world.steps_of(stepped)
    await world.set_step(step_row["id"], status="running", claimed_by="host:test", claim_expires_at=lease)
    (parked_step, _) = await world.steps_of(parked)
    await world.set_step(parked_step["id"], status="running", claimed_by="host:test", claim_expires_at=None)
    await world.set_run(expired, claimed_by="host:test", claim_expires_at=now - dt.timedelta(seconds=1))
    await world.set_run(stepped, claimed_by="cli:9", claim_expires_at=lease)

    report = await health(world.engine, now, interval_seconds=INTERVAL)
    (process,) = report.processes
    assert process.runs == [held]
    assert process.steps == [HeldStep(stepped, step_row["id"])]
    (stranger,) = report.other_holders
    assert (stranger.owner, stranger.runs, stranger.steps) == ("cli:9", [stepped], [])


async def test_a_process_that_stopped_beating_is_dead_and_with_none_alive_it_is_a_problem(
    world: World,
) -> None:
    await _heartbeat(world).beat()
    late = T0 + dead_after(INTERVAL)
    report = await health(world.engine, late, interval_seconds=INTERVAL)
    assert report.live and report.healthy, "exactly at the limit it is still alive"

    report = await health(world.engine, late + dt.timedelta(seconds=1), interval_seconds=INTERVAL)
    (process,) = report.processes
    assert not process.alive
    assert report.problems == [
        "no bot process is running: none has written a heartbeat lately (start it with python -m bot run)"
    ]
    assert report.warnings == [
        "process host:test on box has not been seen for 31 s: it stopped without closing, or hangs"
    ]

    # Another process beating makes it healthy again; the dead one stays a warning.
    await _heartbeat(world, "other:2", ManualClock(late)).beat()
    report = await health(world.engine, late + dt.timedelta(seconds=1), interval_seconds=INTERVAL)
    assert report.healthy and [p.owner for p in report.live] == ["other:2"]
    assert len(report.warnings) == 1

    # Several dead are summed up in one line (a crash loop leaves a row per restart).
    await _heartbeat(world, "third:3", ManualClock(T0 - dt.timedelta(minutes=10))).beat()
    report = await health(world.engine, late + dt.timedelta(seconds=1), interval_seconds=INTERVAL)
    assert report.warnings == [
        "2 processes have not been seen for a while (up to 11 min): they stopped without closing, or hang"
    ]


async def test_a_process_whose_ticks_run_late_is_a_problem(world: World) -> None:
    beat = _heartbeat(world)
    loop = RunnerLoop(world.runner, interval=INTERVAL, heartbeat=beat)
    await loop.run_once()
    world.clock.advance(INTERVAL + 4)
    await loop.run_once()
    report = await health(world.engine, world.clock.now(), interval_seconds=INTERVAL)
    assert report.healthy, "4 s late on a 5 s interval is within the floor"

    world.clock.advance(INTERVAL + 12)
    await loop.run_once()
    report = await health(world.engine, world.clock.now(), interval_seconds=INTERVAL)
    (process,) = report.processes
    assert process.tick_lag_seconds == 12 and process.lagging
    assert report.problems == [
        "process host:test ticks late: a tick started 12 s after it was due "
        "(is its host overloaded, or its event loop blocked?)"
    ]


async def test_stalled_runs_are_a_problem_and_degraded_ones_a_warning(world: World) -> None:
    await _heartbeat(world).beat()
    ok = await _cue_run(world)
    degraded = await _cue_run(world)
    stalled = await _cue_run(world)
    ended = await _cue_run(world)
    await world.set_run(degraded, status="running", health="degraded", last_error="step 3 failed: boom")
    await world.set_run(stalled, status="running", health="stalled")
    await world.set_run(ended, status="completed", health="stalled")

    report = await health(world.engine, world.clock.now(), interval_seconds=INTERVAL)
    assert [(r.id, r.health) for r in report.unwell] == [(stalled, "stalled"), (degraded, "degraded")]
    assert report.unwell_total == 2 and ok not in [r.id for r in report.unwell]
    assert report.unwell[1].last_error == "step 3 failed: boom"
    assert report.unwell[0].definition_key.startswith("seed-")
    assert report.problems == ["1 run stalled: nobody has advanced it when due"]
    assert report.warnings == ["1 run degraded: a step failed or was retried, and the run carried on"]


async def test_runs_due_that_nobody_picked_up_are_overdue_oldest_first(world: World) -> None:
    """A wake further back than the tolerance, with no live lease, is a run nobody picks up; a
    run within the tolerance, or under someone's live lease, is not."""
    await _heartbeat(world).beat()
    now = world.clock.now()
    tolerance = overdue_after(INTERVAL)
    assert tolerance == 30.0
    oldest, older, recent, leased = [await _cue_run(world) for _ in range(4)]
    await world.set_run(oldest, wake_at=now - dt.timedelta(seconds=600))
    await world.set_run(older, wake_at=now - dt.timedelta(seconds=tolerance + 1))
    await world.set_run(recent, wake_at=now - dt.timedelta(seconds=tolerance - 1))
    await world.set_run(
        leased,
        wake_at=now - dt.timedelta(seconds=900),
        claimed_by="host:test",
        claim_expires_at=now + dt.timedelta(seconds=30),
    )
    report = await health(world.engine, now, interval_seconds=INTERVAL)
    assert [r.id for r in report.overdue] == [oldest, older]
    assert report.overdue_total == 2 and report.oldest_overdue_seconds == 600
    assert report.problems == [
        "2 runs due but not picked up, the oldest for 10 min (is every bot process down or behind?)"
    ]


async def test_many_overdue_runs_are_listed_up_to_the_limit_and_counted(world: World) -> None:
    from runner.views.health import LISTED_RUNS

    await _heartbeat(world).beat()
    now = world.clock.now()
    ids = [await _cue_run(world) for _ in range(LISTED_RUNS + 3)]
    for index, run_id in enumerate(ids):
        await world.set_run(run_id, wake_at=now - dt.timedelta(seconds=3600 - index))
    report = await health(world.engine, now, interval_seconds=INTERVAL)
    assert [r.id for r in report.overdue] == ids[:LISTED_RUNS]
    assert report.overdue_total == LISTED_RUNS + 3


async def test_a_database_that_cannot_be_reached_is_an_answer_not_an_error(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'eventbot.sqlite3'}")
    try:
        report = await health(engine, T0, interval_seconds=INTERVAL)
    finally:
        await engine.dispose()
    assert not report.database.reachable and report.database.latency_ms is None
    assert report.database.error is not None and "unable to open database file" in report.database.error
    (problem,) = report.problems
    assert problem.startswith("the database cannot be reached: ")
    assert report.warnings == [] and not report.healthy


async def test_a_database_behind_the_code_says_to_migrate(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.sqlite3'}")
    try:
        report = await health(engine, T0, interval_seconds=INTERVAL)
    finally:
        await engine.dispose()
    assert report.database.reachable and report.database.schema is None
    assert report.problems == [
        f"the database is at schema none, this code needs {report.database.head}: run python -m bot migrate"
    ]
