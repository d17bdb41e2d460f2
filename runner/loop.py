"""Keep ticking: the loop every long-running front end drives the runner with.

* It sleeps until the next due step when that is sooner than the interval, so a wait that ends
  at 20:00:00.3 is served at 20:00:00.3, not at the next multiple of the interval.
* ``nudge()`` wakes it at once (after a control or a cue click), so the next step goes out now.
* A database outage never stops it: the first failure is logged once, ticks back off
  exponentially up to a cap, and the recovery is logged once when a tick succeeds again.
* Any other error is logged (once while it repeats) and the loop carries on.

Time comes from outside: the runner's clock for instants, and an injected ``sleep`` and
``monotonic`` for waiting and for timing an outage, so a test drives the loop in virtual time and
asserts on exactly what it did instead of polling the wall clock.

Nothing here knows Discord; the bot wraps it in a ``discord.ext.tasks`` loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from runner import backoff
from runner.clock import Clock
from runner.db import DATABASE_ERRORS
from runner.engine import TickReport
from runner.heartbeat import Heartbeat

log = logging.getLogger(__name__)


@dataclass
class LoopState:
    ticks: int = 0
    failures: int = 0
    outages: int = 0
    database_down_since: float | None = None
    last_report: TickReport | None = None


class Ticking(Protocol):
    """What the loop drives: ``runner.engine.Runner``, or a stand-in a test scripts."""

    @property
    def clock(self) -> Clock: ...

    async def tick(self) -> TickReport: ...

    async def next_wake(self) -> dt.datetime | None: ...


Sleep = Callable[[float], Awaitable[object]]


class RunnerLoop:
    def __init__(
        self,
        runner: Ticking,
        *,
        interval: float = 5.0,
        stuck_delay: float = 0.5,
        backoff_start: float = 1.0,
        backoff_cap: float = 60.0,
        backoff_jitter: float = 0.0,
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        heartbeat: Heartbeat | None = None,
    ) -> None:
        self.runner = runner
        # This process's row in ``runner_processes``: the front ends that serve (the bot) pass one.
        self.heartbeat = heartbeat
        # When the next tick is due: the end of the last one plus the sleep it chose.
        self._due_at: dt.datetime | None = None
        self._sleep = sleep
        self._monotonic = monotonic
        self.interval = interval
        self.stuck_delay = stuck_delay
        self.backoff_start = backoff_start
        self.backoff_cap = backoff_cap
        # No jitter by default: one loop per process retries at most once a second, which no
        # database notices; several bots on one server can spread their retries with it.
        self.backoff_jitter = backoff_jitter
        self.state = LoopState()
        self._wake = asyncio.Event()
        self._stopping = False
        self._failed_ticks = 0  # in the current outage
        self._last_error: str | None = None

    def nudge(self) -> None:
        """Tick as soon as possible (thread-unsafe by design: call from the loop's thread)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run_once(self) -> float:
        """One tick; answers how long to sleep before the next one (unless nudged)."""
        self._wake.clear()
        started = self.runner.clock.now()
        try:
            report = await self.runner.tick()
            delay = await self._delay_until_next_wake(started)
        except DATABASE_ERRORS as exc:
            self._due_at = None  # the backoff is no lag
            return self._database_failed(exc)
        except Exception as exc:
            self._due_at = None
            self.state.failures += 1
            text = f"{type(exc).__name__}: {exc}"
            if text != self._last_error:
                log.exception("tick failed; carrying on")
                self._last_error = text
            return self.interval
        self.state.ticks += 1
        self.state.last_report = report
        self._last_error = None
        if self.state.database_down_since is not None:
            down_for = self._monotonic() - self.state.database_down_since
            log.warning("database reachable again after %.1f s; ticking resumes", down_for)
            self.state.database_down_since = None
            self._failed_ticks = 0
        await self._beat(started, delay)
        return delay

    async def _beat(self, started: dt.datetime, delay: float) -> None:
        """Tell the heartbeat how late this tick ran and how long it took; it writes at most
        once per interval, and never raises."""
        finished = self.runner.clock.now()
        due, self._due_at = self._due_at, finished + dt.timedelta(seconds=delay)
        if self.heartbeat is not None:
            self.heartbeat.ticked(started, due, finished)
            await self.heartbeat.beat()

    def _database_failed(self, exc: BaseException) -> float:
        self.state.failures += 1
        if self.state.database_down_since is None:
            self.state.outages += 1
            self.state.database_down_since = self._monotonic()
            log.error("database unreachable (%s: %s); retrying with backoff", type(exc).__name__, exc)
            self._failed_ticks = 0
        delay = backoff.delay(
            self._failed_ticks, first=self.backoff_start, cap=self.backoff_cap, jitter=self.backoff_jitter
        )
        self._failed_ticks += 1
        return delay

    async def _delay_until_next_wake(self, tick_started: dt.datetime) -> float:
        """Until the next wake, capped by the interval; a future wake is served on time, however
        close. A wake that fell due while the tick ran is served at once. A wake that was already
        due when the tick began and is still there belongs to a run this process could not move
        (another process holds its lease): ``stuck_delay`` keeps the loop from spinning on it."""
        wake = await self.runner.next_wake()
        if wake is None:
            return self.interval
        seconds = (wake - self.runner.clock.now()).total_seconds()
        if seconds > 0:
            return min(self.interval, seconds)
        if wake > tick_started:
            return 0.0
        return min(self.stuck_delay, self.interval)

    async def sleep(self, delay: float) -> None:
        """Sleep ``delay`` seconds (the injected ``sleep``), or less if nudged."""
        if delay <= 0 or self._wake.is_set():
            return
        sleeping = asyncio.ensure_future(self._sleep(delay))
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((sleeping, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (sleeping, woken):
                waiter.cancel()
            # Both are finished before returning, so no waiter outlives the sleep it served.
            await asyncio.gather(sleeping, woken, return_exceptions=True)

    async def run_forever(self) -> None:
        while not self._stopping:
            delay = await self.run_once()
            if self._stopping:
                break
            await self.sleep(delay)
