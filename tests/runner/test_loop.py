"""The serving loop: wakes at the next due step, at once when nudged, and survives a database
outage with one log line for the outage and one for the recovery."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from sqlalchemy import exc as sa_exc

from runner.clock import SystemClock
from runner.engine import TickReport
from runner.loop import RunnerLoop
from tests.support.world import World, phase, step


async def test_the_loop_sleeps_until_the_next_due_step_not_the_whole_interval(world: World) -> None:
    world.register(world.scripted.action("test.wait"), world.scripted.action("test.after"))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 0.2}
    world.runner.clock = SystemClock()
    world.controls.clock = world.runner.clock
    run_id = await world.seed_run(
        [phase("main", step("test.wait"), step("test.after"))], scheduled_for=SystemClock().now()
    )
    loop = RunnerLoop(world.runner, interval=30)
    task = asyncio.create_task(loop.run_forever())
    started = time.monotonic()
    try:
        while (await world.run(run_id))["status"] != "completed":
            assert time.monotonic() - started < 5, "the loop slept through the wait's end"
            await asyncio.sleep(0.02)
    finally:
        loop.stop()
        await task
    assert 0.2 <= time.monotonic() - started < 2


async def test_a_nudge_ticks_at_once(world: World) -> None:
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.after"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    world.runner.clock = SystemClock()
    world.controls.clock = world.runner.clock
    run_id = await world.seed_run(
        [phase("main", step("test.cue"), step("test.after"))], scheduled_for=SystemClock().now()
    )
    loop = RunnerLoop(world.runner, interval=30)
    world.controls._on_change = loop.nudge
    task = asyncio.create_task(loop.run_forever())
    try:
        for _ in range(500):
            steps = await world.steps_of(run_id)
            if steps[0]["status"] == "running":
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        confirmed_at = time.monotonic()
        assert (await world.controls.confirm(steps[0]["id"], actor="gm")).ok
        while (await world.run(run_id))["status"] != "completed":
            assert time.monotonic() - confirmed_at < 2, "a nudge must not wait for the 30 s interval"
            await asyncio.sleep(0.01)
    finally:
        loop.stop()
        await task


class FlakyRunner:
    """A runner whose database is down for the first ``down`` ticks."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls = 0
        self.clock = SystemClock()

    async def tick(self) -> TickReport:
        self.calls += 1
        if self.calls <= self.down:
            raise sa_exc.OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))
        return TickReport()

    async def next_wake(self) -> None:
        return None


async def test_a_database_outage_backs_off_is_logged_once_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="runner.loop")
    flaky = FlakyRunner(down=5)
    loop = RunnerLoop(flaky, interval=7, backoff_start=1, backoff_cap=4)  # type: ignore[arg-type]
    delays = [await loop.run_once() for _ in range(7)]
    assert delays == [1, 2, 4, 4, 4, 7, 7], "exponential backoff up to its cap, then the interval again"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1
    assert loop.state.outages == 1 and loop.state.ticks == 2


async def test_an_unexpected_tick_error_does_not_stop_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(FlakyRunner):
        async def tick(self) -> TickReport:
            self.calls += 1
            if self.calls <= 3:
                raise RuntimeError("bug")
            return TickReport()

    caplog.set_level(logging.ERROR, logger="runner.loop")
    loop = RunnerLoop(Broken(0), interval=2)  # type: ignore[arg-type]
    assert [await loop.run_once() for _ in range(4)] == [2, 2, 2, 2]
    assert loop.state.ticks == 1
    assert len(caplog.records) == 1, "the same error is logged once while it repeats"


class StubRunner:
    """Answers a fixed next wake, to see how long the loop decides to sleep."""

    def __init__(self, wake_in: float | None) -> None:
        self.clock = SystemClock()
        self.wake_in = wake_in

    async def tick(self) -> TickReport:
        return TickReport()

    async def next_wake(self):  # type: ignore[no-untyped-def]
        import datetime as dt

        return None if self.wake_in is None else self.clock.now() + dt.timedelta(seconds=self.wake_in)


@pytest.mark.parametrize(
    ("wake_in", "expected"),
    [(None, 5.0), (30.0, 5.0), (0.3, 0.3), (-2.0, 0.5)],
)
async def test_the_loop_sleeps_exactly_until_a_near_wake_and_only_floors_a_past_one(
    wake_in, expected
) -> None:  # type: ignore[no-untyped-def]
    """A wait ending in 0.3 s is served in 0.3 s, not at a floor; only a wake that was already
    past before the tick began (a run another process holds) is floored, so the loop cannot
    spin on it."""
    loop = RunnerLoop(StubRunner(wake_in), interval=5.0, stuck_delay=0.5)  # type: ignore[arg-type]
    assert await loop.run_once() == pytest.approx(expected, abs=0.05)


async def test_a_wake_that_fell_due_during_the_tick_is_served_at_once() -> None:
    """Found by the timeliness benchmark: a step due while a tick ran waited out the floor
    (half a second) instead of being served by an immediate second tick."""
    import datetime as dt

    class SlowTick(StubRunner):
        due: dt.datetime

        async def tick(self) -> TickReport:
            self.due = self.clock.now() + dt.timedelta(milliseconds=5)
            await asyncio.sleep(0.02)  # the step falls due while this tick runs
            return TickReport()

        async def next_wake(self):  # type: ignore[no-untyped-def]
            return self.due

    loop = RunnerLoop(SlowTick(None), interval=5.0, stuck_delay=0.5)  # type: ignore[arg-type]
    assert await loop.run_once() == 0.0
