"""Fan-out: 500 runs of one ``discord.announce`` step through a delivery that enforces Discord's
global limit of 50 requests per second, against the 10 s that limit makes the floor.

Everything is the production wiring: ``wiring.services.assemble`` with the production
``RunnerSettings()``, the real ``discord.announce`` action, ``controls.start`` creating the 500
runs (one definition, 500 scopes), and ``RunnerLoop`` serving them. The clock starts before the
start control and stops when the database says all 500 runs completed.
"""

from __future__ import annotations

import asyncio
import bisect
import random
import time
from typing import Any

import sqlalchemy as sa

from actions.delivery import Announcement, Cue, Posted
from bench.backends import Backend, MariaDBBackend, fresh_engine
from bench.results import Options, Result, median
from bench.statements import ServerCounters, slow_log_summary
from bench.workloads import publish
from runner.engine import RunnerSettings
from runner.history import Actor
from runner.loop import RunnerLoop
from runner.schema import runs
from tests.support.definitions import announce, event, phase
from wiring.services import assemble

RUNS = 500
QUICK_RUNS = 150  # --quick: a smoke pass, not the figure (fixed costs weigh more)
RATE = 50.0
TARGET_RATIO = 1.1


class RateLimitedDelivery:
    """A ``Delivery`` with Discord's global limit: requests start at most ``rate`` per second
    (evenly spaced, no burst credit), and each then takes a simulated round trip. A request over
    the limit waits for its slot, as discord.py does on its global bucket; it is never refused.
    """

    def __init__(self, rate: float = RATE, latency: tuple[float, float] = (0.05, 0.1), seed: int = 1) -> None:
        self.spacing = 1.0 / rate
        self.latency = latency
        self.random = random.Random(seed)
        self._next_slot = 0.0
        self.starts: list[float] = []
        self.keys: set[str] = set()
        self.duplicates = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.expected = 0
        self.all_sent = asyncio.Event()

    async def _request(self) -> None:
        now = time.monotonic()
        slot = max(now, self._next_slot)
        self._next_slot = slot + self.spacing
        # The limiter's own schedule is what proves the limit held (the loop's timer jitter is not
        # the limiter letting a request through early).
        self.starts.append(slot)
        if slot > now:
            await asyncio.sleep(slot - now)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.random.uniform(*self.latency))
        finally:
            self.in_flight -= 1

    async def announce(self, announcement: Announcement) -> Posted:
        await self._request()
        if announcement.idempotency_key in self.keys:
            self.duplicates += 1
        self.keys.add(announcement.idempotency_key)
        if len(self.keys) >= self.expected:
            self.all_sent.set()
        return Posted(channel_id="1", message_id=str(len(self.keys)), channel_name=announcement.channel)

    async def post_cue(self, cue: Cue) -> Posted:
        await self._request()
        return Posted(channel_id="2", message_id=str(len(self.keys)), channel_name=cue.channel)

    async def check(self, request: Announcement | Cue) -> list[str]:
        return []

    def busiest_second(self) -> int:
        """The most requests that started within any one second: proves the limiter held."""
        starts = sorted(self.starts)
        return max((bisect.bisect_left(starts, t + 1.0 - 1e-6) - i for i, t in enumerate(starts)), default=0)


async def measure(
    backend: Backend, count: int = RUNS, settings: RunnerSettings | None = None
) -> dict[str, Any]:
    delivery = RateLimitedDelivery()
    delivery.expected = count
    async with fresh_engine(backend) as engine:
        loops: list[RunnerLoop] = []
        services = assemble(
            engine,
            lambda describe: delivery,
            settings=settings or RunnerSettings(),
            owner="bench",
            # As the bot wires it: a control that changed something wakes the loop at once.
            on_change=lambda: loops[0].nudge(),
        )
        raw = event(
            "fanout",
            phase("main", announce("The invasion of {scope} begins")),
            title="Fan-out",
            scopes=[f"world-{i}" for i in range(count)],
        )
        await publish(engine, raw, services.registry)
        loop = RunnerLoop(services.runner, interval=5)
        loops.append(loop)
        task = asyncio.create_task(loop.run_forever())
        try:
            await asyncio.sleep(0.2)  # the loop is up and asleep, as in a running bot
            with ServerCounters(backend) as counters:
                started = time.monotonic()
                result = await services.controls.start("fanout", actor=Actor(None, "bench"))
                start_returned = time.monotonic() - started
                assert result.ok and len(result.run_ids) == count, result.message
                query = sa.select(sa.func.count()).select_from(runs).where(runs.c.status == "completed")
                async with asyncio.timeout(120):
                    # Only look in the database once every announcement went out, so the bench's
                    # own polling does not compete with the runner for the connection.
                    await delivery.all_sent.wait()
                    while True:
                        async with engine.connect() as conn:
                            done = int((await conn.execute(query)).scalar() or 0)
                        if done == count:
                            break
                        await asyncio.sleep(0.01)
                elapsed = time.monotonic() - started
        finally:
            loop.stop()
            await asyncio.wait_for(task, timeout=30)
    assert len(delivery.keys) == count and delivery.duplicates == 0, (len(delivery.keys), delivery.duplicates)
    return {
        "seconds": elapsed,
        "busiest": delivery.busiest_second(),
        "peak": delivery.peak_in_flight,
        "ticks": loop.state.ticks,
        "rows_read": counters.per("Rows_read", count),
        "questions": counters.per("Questions", count),
        "start": start_returned,
        "first": min(delivery.starts) - started,
        "last": max(delivery.starts) - started,
    }


async def run(backend: Backend, options: Options) -> list[Result]:
    repeats = max(1, min(options.repeats, 1 if options.quick else 3))
    count = QUICK_RUNS if options.quick else RUNS
    bound = count / RATE
    samples = [await measure(backend, count) for _ in range(repeats)]
    diagnosis: list[str] = []
    if isinstance(backend, MariaDBBackend) and not options.quick:
        # One more, untimed, pass with the slow log on: which statements read the rows.
        with backend.slow_log() as path:
            await measure(backend)
        diagnosis = ["rows examined per statement in one untimed pass (MariaDB slow log, runtime plans):"]
        diagnosis += slow_log_summary(path)
    seconds = median([s["seconds"] for s in samples])
    ratio = seconds / bound
    return [
        Result(
            f"fan-out {count} announces @50/s",
            backend.name,
            f"{seconds:.2f} s",
            f"{bound:.0f} s bound",
            ratio,
            f"<= {TARGET_RATIO}x bound",
            ratio <= TARGET_RATIO,
            [
                f"{repeats} repeats: "
                + "; ".join(
                    f"{s['seconds']:.2f} s (start control returned at {s['start']:.2f} s, "
                    f"requests from {s['first']:.2f} s to {s['last']:.2f} s; "
                    f"busiest second {s['busiest']:.0f} requests, "
                    f"{s['peak']:.0f} in flight at most, {s['ticks']:.0f} ticks"
                    + (
                        f"; per run: {s['questions']:.1f} server commands, {s['rows_read']:.1f} rows read)"
                        if s["rows_read"] is not None
                        else ")"
                    )
                    for s in samples
                ),
                *diagnosis,
            ],
        )
    ]
