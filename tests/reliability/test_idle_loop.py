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
from collections.abc import Awaitable, Callable

import pytest

from runner.loop import RunnerLoop
from tests.support.virtual_time import VirtualTime
from tests.support.world import T0, World, phase, step

LEASE_LEFT = 1.5
# A loop with a 5 s interval that sleeps until the lease runs out ticks a few times in 1.2 s
# (its 0.5 s floor for a wake it cannot serve); ten is generous. The defect ticks hundreds of times.
TICKS_MAX = 10


async def _left_by_a_dead_runner(world: World) -> int:
    world.register(world.scripted.action("test.ok"))
    run_id = await world.seed_run([phase("main", step("test.ok"), step("test.ok"))])
    await world.set_run(
        run_id,
        status="running",
        current_phase="main",
        started_at=T0,
        claimed_by="dead-runner",
        claim_expires_at=T0 + dt.timedelta(seconds=LEASE_LEFT),
        wake_at=T0 - dt.timedelta(seconds=1),
    )
    return run_id


def _loop(world: World) -> tuple[RunnerLoop, VirtualTime]:
    time = VirtualTime(world.clock)
    return RunnerLoop(world.runner, interval=5.0, sleep=time.sleep, monotonic=time.monotonic), time


async def _serve(
    loop: RunnerLoop,
    time: VirtualTime,
    seconds: float,
    done: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Serve for ``seconds`` of virtual time (or until ``done``), letting every sleep the loop
    asks for pass in full. A loop that never sleeps (it spins) fails here, by its tick count."""
    task = asyncio.create_task(loop.run_forever())
    try:
        while time.elapsed < seconds:
            try:
                await time.asleep(len(time.sleeps) + 1)
            except TimeoutError:
                pytest.fail(f"the loop never slept: {loop.state.ticks} ticks")
            if done is not None and await done():
                break
            await time.advance(time.sleeps[-1])
    finally:
        loop.stop()
        await task


async def test_a_fresh_loop_takes_over_a_dead_runners_run_once_its_lease_runs_out(world: World) -> None:
    run_id = await _left_by_a_dead_runner(world)
    loop, time = _loop(world)

    async def completed() -> bool:
        return (await world.run(run_id))["status"] == "completed"

    await _serve(loop, time, LEASE_LEFT + 3, completed)
    assert await completed(), "the run was not taken over after its lease"
    assert LEASE_LEFT <= time.elapsed <= LEASE_LEFT + loop.stuck_delay, (
        "taken over once the lease ran out, and no later than the next floored tick"
    )


async def test_a_fresh_loop_sleeps_while_a_dead_runners_lease_runs_out(world: World) -> None:
    await _left_by_a_dead_runner(world)
    loop, time = _loop(world)
    await _serve(loop, time, 1.2)
    assert loop.state.ticks <= TICKS_MAX, f"{loop.state.ticks} ticks in 1.2 s while nothing could be done"
    assert all(s > 0 for s in time.sleeps), time.sleeps


async def test_a_loop_sleeps_while_a_run_waits_on_a_held_concurrency_key(world: World) -> None:
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.ok"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    holder = await world.seed_run([phase("main", step("test.cue"))], concurrency_key="arena")
    waiter = await world.seed_run([phase("main", step("test.ok"))], concurrency_key="arena")
    loop, time = _loop(world)
    await loop.run_once()  # the holder parks on its cue, the waiter is blocked behind it
    assert (await world.run(holder))["status"] == "running"
    assert (await world.run(waiter))["status"] == "scheduled"
    await _serve(loop, time, 1.2)
    ticks = loop.state.ticks - 1
    assert ticks <= TICKS_MAX, f"{ticks} ticks in 1.2 s while the only work waits on a GM"
    assert time.sleeps == [5.0], "nothing to do until the GM or the interval: one sleep, the interval"
