"""The tick as a ``discord.ext.tasks`` loop that cannot die, wakes early, and sleeps short.

``ext.tasks`` stops a loop for good on any exception outside its short reconnect list
(discord.py #2151), so nothing reaches it: one failing run is contained by the runner; a
database outage is logged once, retried with exponential backoff (capped) and its end logged once
(``runner.loop.RunnerLoop``, shared with every other front end); anything else is logged with its
traceback and the loop carries on at its interval.

How long the loop sleeps is decided each iteration: the configured interval, or less when the
next run is due sooner (``Runner.next_wake``). ``nudge()`` (called by the controls' ``on_change``
and after every command or cue click) wakes it at once, so the next step goes out now rather than
at the next interval: the tick runs there and then, and the loop's own sleep is moved to the
new next wake. The loop sleeps in one place only, its ``ext.tasks`` sleep (see ``WakeableLoop``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import discord
from discord.ext import tasks

from runner.engine import Runner
from runner.heartbeat import Heartbeat
from runner.loop import RunnerLoop

log = logging.getLogger(__name__)


class WakeableLoop:
    """An ``ext.tasks`` loop whose body answers how long to sleep, and that ``nudge()`` wakes.

    * The loop sleeps in one place, its own ``ext.tasks`` sleep; each pass moves that wake-up
      to "``delay`` seconds from now" with ``change_interval``.
    * A nudge while the loop sleeps runs the body at once in a task of its own, then moves the
      sleeping loop's wake-up the same way; a nudge while the body runs makes the body run again
      before it sleeps.
    * The body must not raise; if it does anyway, the error is logged and the loop sleeps its
      interval (it is never allowed to reach ``ext.tasks``, which would stop the loop).
    """

    # Back-to-back passes (nudged again while running) before the loop sleeps anyway.
    MAX_PASSES = 20

    def __init__(
        self,
        body: Callable[[], Awaitable[float]],
        *,
        interval: float,
        name: str,
        before: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.interval = interval
        self.name = name
        self._body = body
        self._nudged = False
        self._lock = asyncio.Lock()
        self._ready = False
        self._wake: asyncio.Task[None] | None = None
        self.task: tasks.Loop[Callable[[], Coroutine[Any, Any, None]]] = tasks.loop(
            seconds=interval, name=name
        )(self._iteration)
        if before is not None:
            self.task.before_loop(before)

    def start(self) -> None:
        if not self.task.is_running():
            self.task.start()

    def cancel(self) -> None:
        self.task.cancel()
        if self._wake is not None:
            self._wake.cancel()

    def is_running(self) -> bool:
        return self.task.is_running()

    def nudge(self) -> None:
        """Run the body again as soon as possible."""
        self._nudged = True
        if not (self._ready and self.task.is_running()) or self._lock.locked():
            return  # not started yet (its first pass is at start), or running: it sees the flag
        if self._wake is None or self._wake.done():
            self._wake = asyncio.create_task(self._woken(), name=f"{self.name}-nudge")

    async def _iteration(self) -> None:
        self._ready = True
        async with self._lock:
            delay = await self._passes()
        self._sleep(delay)

    async def _woken(self) -> None:
        async with self._lock:
            delay = await self._passes()
        if self.task.is_running():
            self._sleep(delay)

    async def _passes(self) -> float:
        delay = self.interval
        for _ in range(self.MAX_PASSES):
            self._nudged = False
            try:
                delay = await self._body()
            except Exception:
                log.exception("%s: unexpected error; the loop carries on", self.name)
                delay = self.interval
            if not self._nudged:
                return delay
        return delay

    def _sleep(self, seconds: float) -> None:
        """Wake ``seconds`` from now.

        A relative ``ext.tasks`` loop wakes at ``last_iteration + interval``, where
        ``last_iteration`` is when its current pass was due; ``next_iteration - interval`` is that
        instant, so the interval is set to what lands the wake-up ``seconds`` from now. (While the
        loop sleeps, ``change_interval`` moves the pending wake-up too.)"""
        upcoming = self.task.next_iteration
        if upcoming is None:
            return
        started = upcoming - dt.timedelta(seconds=self.task.seconds or 0.0)
        target = discord.utils.utcnow() + dt.timedelta(seconds=seconds)
        self.task.change_interval(seconds=max((target - started).total_seconds(), 0.001))


class Ticker:
    """The runner's serving loop (``runner.loop.RunnerLoop``: next-wake delays, database backoff
    and its log lines) driven by a ``WakeableLoop``. Only ``RunnerLoop.run_once`` is used: its
    own sleep waits on an ``asyncio.Event``, and the bot's one place to wait is the ``ext.tasks``
    sleep (which the simulated Discord of the tests can also drive)."""

    def __init__(
        self,
        runner: Runner,
        *,
        interval: float,
        after_tick: Callable[[], None] | None = None,
        before: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        # A wake already past after a tick (a run another process holds) waits RunnerLoop's
        # ``stuck_delay`` rather than spinning; a nudge still runs the next tick at once.
        # This process's row in ``runner_processes`` (``health`` reads it), beaten by the loop.
        self.heartbeat = Heartbeat(runner.engine, runner.owner, runner.clock, interval=interval)
        self.serving = RunnerLoop(runner, interval=interval, heartbeat=self.heartbeat)
        self.after_tick = after_tick
        self.loop = WakeableLoop(self.tick_once, interval=interval, name="eventbot-tick", before=before)

    def start(self) -> None:
        self.loop.start()

    def cancel(self) -> None:
        self.loop.cancel()

    async def aclose(self) -> None:
        """Stop ticking and delete this process's heartbeat row: it is gone, not dead."""
        self.loop.cancel()
        await self.heartbeat.stop()

    def nudge(self) -> None:
        self.loop.nudge()

    @property
    def ticks(self) -> int:
        return self.serving.state.ticks

    async def tick_once(self) -> float:
        """One tick (never raises); answers how long to sleep before the next."""
        delay = await self.serving.run_once()
        if self.after_tick is not None:
            self.after_tick()
        return delay
