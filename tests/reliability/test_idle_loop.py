"""A serving loop with nothing it may do yet sleeps; it does not spin.

Found by the crash test on its first run: after a SIGKILL, the fresh runner's ``RunnerLoop``
ticked hundreds of times a second until the dead runner's lease ran out (298 ticks in 1.5 s on
SQLite, every one a ``BEGIN IMMEDIATE``), and for as long as a holder lasted when a run waited on
its concurrency key. ``next_wake`` was ``MIN(wake_at)`` over runs this process could not take, so
the delay came out negative and was clamped to ``min_delay=0``. The lead fixed it while these
tests were being written (commit 0200283: ``stuck_delay`` for a wake already past, blocked runs
get a recheck time and are woken by their holder); the tests stay as its regression guard, with
the check the fix must keep: the run is still taken over promptly once the lease has run out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

from runner.clock import SystemClock
from runner.loop import RunnerLoop
from tests.support.world import World, phase, step

LEASE_LEFT = 1.5
# A loop with a 5 s interval that sleeps until the lease runs out ticks once or twice in 1.2 s;
# ten is generous. The defect ticks hundreds of times.
TICKS_MAX = 10


def _system_clock(world: World) -> SystemClock:
    clock = SystemClock()
    world.runner.clock = clock
    world.controls.clock = clock
    return clock


async def _left_by_a_dead_runner(world: World, clock: SystemClock) -> int:
    world.register(world.scripted.action("test.ok"))
    now = clock.now()
    run_id = await world.seed_run([phase("main", step("test.ok"), step("test.ok"))], scheduled_for=now)
    await world.set_run(
        run_id,
        status="running",
        current_phase="main",
        started_at=now,
        claimed_by="dead-runner",
        claim_expires_at=now + dt.timedelta(seconds=LEASE_LEFT),
        wake_at=now - dt.timedelta(seconds=1),
    )
    return run_id


async def _ticks_during(loop: RunnerLoop, seconds: float) -> int:
    task = asyncio.create_task(loop.run_forever())
    try:
        await asyncio.sleep(seconds)
        return loop.state.ticks
    finally:
        loop.stop()
        await task


async def test_a_fresh_loop_takes_over_a_dead_runners_run_once_its_lease_runs_out(world: World) -> None:
    clock = _system_clock(world)
    run_id = await _left_by_a_dead_runner(world, clock)
    loop = RunnerLoop(world.runner, interval=5.0)
    task = asyncio.create_task(loop.run_forever())
    started = time.monotonic()
    try:
        while (await world.run(run_id))["status"] != "completed":
            assert time.monotonic() - started < LEASE_LEFT + 3, "the run was not taken over after its lease"
            await asyncio.sleep(0.05)
    finally:
        loop.stop()
        await task
    assert time.monotonic() - started >= LEASE_LEFT - 0.2, "a live lease was not respected"


async def test_a_fresh_loop_sleeps_while_a_dead_runners_lease_runs_out(world: World) -> None:
    clock = _system_clock(world)
    await _left_by_a_dead_runner(world, clock)
    ticks = await _ticks_during(RunnerLoop(world.runner, interval=5.0), 1.2)
    assert ticks <= TICKS_MAX, f"{ticks} ticks in 1.2 s while nothing could be done"


async def test_a_loop_sleeps_while_a_run_waits_on_a_held_concurrency_key(world: World) -> None:
    clock = _system_clock(world)
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.ok"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    now = clock.now()
    holder = await world.seed_run(
        [phase("main", step("test.cue"))], scheduled_for=now, concurrency_key="arena"
    )
    waiter = await world.seed_run(
        [phase("main", step("test.ok"))], scheduled_for=now, concurrency_key="arena"
    )
    loop = RunnerLoop(world.runner, interval=5.0)
    await loop.run_once()  # the holder parks on its cue, the waiter is blocked behind it
    assert (await world.run(holder))["status"] == "running"
    assert (await world.run(waiter))["status"] == "scheduled"
    ticks = await _ticks_during(loop, 1.2) - 1
    assert ticks <= TICKS_MAX, f"{ticks} ticks in 1.2 s while the only work waits on a GM"
