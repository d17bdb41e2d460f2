"""The tick as a ``discord.ext.tasks`` loop that cannot die, wakes early, and sleeps short.

``ext.tasks`` stops a loop for good on any exception outside its short reconnect list
(discord.py #2151), so nothing reaches it: one failing run is contained by the runner; a
database outage is logged once, retried with exponential backoff (capped) and its end logged once
(``runner.loop.RunnerLoop``, shared with every other front end); anything else is logged with its
traceback and the loop carries on at its interval.

How long the loop sleeps is decided each iteration: the configured interval, or less when the
next run is due sooner (``Runner.next_wake``). A control's change (``RunsChanged`` on the
runner's bus, published by the controls after their commit) wakes it at once, so the next step
goes out now rather than at the next interval: the tick runs there and then, and the loop's own
sleep is moved to the new next wake. The loop sleeps in one place only, its ``ext.tasks`` sleep
(``bot.background.WakeableLoop``). The tick's end is ``TickFinished`` on the same bus, which the
loops that show the run log follow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from bot.background import WakeableLoop
from runner.bus import RunsChanged, VersionPublished
from runner.engine import Runner
from runner.heartbeat import Heartbeat
from runner.loop import RunnerLoop

log = logging.getLogger(__name__)


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
        before: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        # A wake already past after a tick (a run another process holds) waits RunnerLoop's
        # ``stuck_delay`` rather than spinning; a nudge still runs the next tick at once.
        # This process's row in ``runner_processes`` (``health`` reads it), beaten by the loop.
        self.heartbeat = Heartbeat(runner.engine, runner.owner, runner.clock, interval=interval)
        self.serving = RunnerLoop(runner, interval=interval, heartbeat=self.heartbeat)
        self.loop = WakeableLoop(self.tick_once, interval=interval, name="eventbot-tick", before=before)
        self._subscription = runner.bus.subscribe(
            lambda _event: self.loop.wake(), {RunsChanged, VersionPublished}
        )

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        """Stop ticking (a tick under way is cancelled and its connection returned)."""
        self._subscription.unsubscribe()
        await self.loop.stop()

    async def aclose(self) -> None:
        """Stop ticking and delete this process's heartbeat row: it is gone, not dead."""
        await self.stop()
        await self.heartbeat.stop()

    @property
    def ticks(self) -> int:
        return self.serving.state.ticks

    async def tick_once(self) -> float:
        """One tick (never raises); answers how long to sleep before the next."""
        return await self.serving.run_once()
