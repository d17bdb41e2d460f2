"""The serving loop: wakes at the next due step, at once when nudged, and survives a database
outage with one log line for the outage and one for the recovery.

Every test drives the loop in virtual time (``tests.support.virtual_time``): the loop's sleep
returns only when the test moves time, so what it waited for is asserted exactly."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest
from sqlalchemy import exc as sa_exc

from runner.clock import ManualClock
from runner.engine import TickReport
from runner.history import Actor
from runner.loop import RunnerLoop
from tests.support.definitions import phase, step
from tests.support.virtual_time import VirtualTime
from tests.support.world import T0, World


async def test_the_loop_sleeps_until_the_next_due_step_not_the_whole_interval(world: World) -> None:
    world.register(world.scripted.action("test.wait"), world.scripted.action("test.after"))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 0.2}
    served_at: list[dt.datetime] = []
    world.scripted["test.after"].answer = lambda envelope: served_at.append(world.clock.now()) or {"ok": True}
    run_id = await world.seed_run([phase("main", step("test.wait"), step("test.after"))])
    time = VirtualTime(world.clock)
    loop = RunnerLoop(world.runner, interval=30, sleep=time.sleep, monotonic=time.monotonic)
    task = asyncio.create_task(loop.run_forever())
    try:
        await time.asleep(1)
        assert time.sleeps == [0.2], "asleep only until the wait ends, not for the 30 s interval"
        assert served_at == []
        await time.advance(0.2)
        await time.asleep(2)
        assert served_at == [T0 + dt.timedelta(seconds=0.2)], "served the instant the wait ended"
        assert (await world.run(run_id))["status"] == "completed"
        assert time.sleeps == [0.2, 30], "nothing left to do: the interval"
    finally:
        loop.stop()
        await task


async def test_a_nudge_ticks_at_once(world: World) -> None:
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.after"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.after"))])
    time = VirtualTime(world.clock)
    loop = RunnerLoop(world.runner, interval=30, sleep=time.sleep, monotonic=time.monotonic)
    world.controls._on_change = loop.nudge
    task = asyncio.create_task(loop.run_forever())
    try:
        await time.asleep(1)
        cue = (await world.steps_of(run_id))[0]
        assert cue["status"] == "running" and time.sleeps == [30], "parked on the cue, asleep"
        assert (await world.controls.confirm(cue["id"], actor=Actor(None, "gm"))).ok
        # Virtual time never moves here, so only the nudge can have woken the loop.
        await time.asleep(2)
        assert (await world.run(run_id))["status"] == "completed"
        assert time.elapsed == 0 and world.scripted["test.after"].calls
    finally:
        loop.stop()
        await task


class FlakyRunner:
    """A runner whose database is down for the first ``down`` ticks."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls = 0
        self.clock = ManualClock(T0)

    async def tick(self) -> TickReport:
        self.calls += 1
        if self.calls <= self.down:
            raise sa_exc.OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))
        return TickReport()

    async def next_wake(self) -> dt.datetime | None:
        return None


async def test_a_database_outage_backs_off_is_logged_once_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="runner.loop")
    flaky = FlakyRunner(down=5)
    time = VirtualTime(flaky.clock)
    loop = RunnerLoop(flaky, interval=7, backoff_start=1, backoff_cap=4, monotonic=time.monotonic)
    delays = []
    for _ in range(7):
        delays.append(await loop.run_once())
        await time.advance(delays[-1])
    assert delays == [1, 2, 4, 4, 4, 7, 7], "exponential backoff up to its cap, then the interval again"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert [m for m in messages if "reachable again" in m] == [
        "database reachable again after 15.0 s; ticking resumes"
    ], "the outage lasted the backoffs slept through: 1 + 2 + 4 + 4 + 4 s"
    assert loop.state.outages == 1 and loop.state.ticks == 2


async def test_an_unexpected_tick_error_does_not_stop_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(FlakyRunner):
        async def tick(self) -> TickReport:
            self.calls += 1
            if self.calls <= 3:
                raise RuntimeError("bug")
            return TickReport()

    caplog.set_level(logging.ERROR, logger="runner.loop")
    loop = RunnerLoop(Broken(0), interval=2)
    assert [await loop.run_once() for _ in range(4)] == [2, 2, 2, 2]
    assert loop.state.ticks == 1
    assert len(caplog.records) == 1, "the same error is logged once while it repeats"


class StubRunner:
    """Answers a fixed next wake, to see how long the loop decides to sleep."""

    def __init__(self, wake_in: float | None) -> None:
        self.clock = ManualClock(T0)
        self.wake_in = wake_in

    async def tick(self) -> TickReport:
        return TickReport()

    async def next_wake(self) -> dt.datetime | None:
        return None if self.wake_in is None else self.clock.now() + dt.timedelta(seconds=self.wake_in)


@pytest.mark.parametrize(
    ("wake_in", "expected"),
    [(None, 5.0), (30.0, 5.0), (0.3, 0.3), (-2.0, 0.5)],
)
async def test_the_loop_sleeps_exactly_until_a_near_wake_and_only_floors_a_past_one(
    wake_in: float | None, expected: float
) -> None:
    """A wait ending in 0.3 s is served in 0.3 s, not at a floor; only a wake that was already
    past before the tick began (a run another process holds) is floored, so the loop cannot
    spin on it."""
    loop = RunnerLoop(StubRunner(wake_in), interval=5.0, stuck_delay=0.5)
    assert await loop.run_once() == expected


async def test_a_wake_that_fell_due_during_the_tick_is_served_at_once() -> None:
    """Found by the timeliness benchmark: a step due while a tick ran waited out the floor
    (half a second) instead of being served by an immediate second tick."""

    class SlowTick(StubRunner):
        due: dt.datetime

        async def tick(self) -> TickReport:
            self.due = self.clock.now() + dt.timedelta(milliseconds=5)
            self.clock.advance(0.02)  # the tick takes 20 ms: the step falls due while it runs
            return TickReport()

        async def next_wake(self) -> dt.datetime | None:
            return self.due

    loop = RunnerLoop(SlowTick(None), interval=5.0, stuck_delay=0.5)
    assert await loop.run_once() == 0.0


async def test_a_nudge_or_a_stop_cuts_the_injected_sleep_short() -> None:
    """The loop waits on the sleep it was given, and a nudge (or ``stop``) ends that wait
    without any time passing; the sleep it cut short is not left pending."""
    runner = StubRunner(None)
    time = VirtualTime(runner.clock)
    loop = RunnerLoop(runner, interval=5.0, sleep=time.sleep, monotonic=time.monotonic)
    task = asyncio.create_task(loop.run_forever())
    try:
        await time.asleep(1)
        loop.nudge()
        await time.asleep(2)
        assert time.sleeps == [5.0, 5.0] and time.elapsed == 0
        assert loop.state.ticks == 2, "the nudge ran a tick"
        assert time.pending == 1, "only the current sleep is pending: the one cut short is gone"
    finally:
        loop.stop()
        await task
    assert loop.state.ticks == 2 and time.pending == 0, "stop ended the last sleep; no tick after it"
