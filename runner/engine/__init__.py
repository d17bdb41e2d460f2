"""The runner: one ``tick`` that moves every due run as far as it can.

One tick, in order (each stage in its own module, mixed into ``Runner``):

1. **Reclaim** (``reclaim``) steps whose runner died: give up on spent ones first, then hand the
   rest back, never touching ``attempts`` and never touching a parked cue. Stale run leases are
   dropped; runs nobody advances are marked ``stalled``.
2. **Materialise** (``occurrences``) upcoming occurrences of once/cron definitions and mark
   **missed** those past their own definition's grace window.
3. **Advance** (``advance``) each due run, concurrently, one step at a time (``steps``: claim,
   perform, settle), across phase boundaries to completion, and give the lease back with the
   time it next needs a tick.
4. **Prune** (``retention``) the history of runs that ended longer ago than the retention
   period, with the housekeeping and after the advance: one small batch per pass, a summary of
   each run kept, so a due step never waits behind it.

The engine knows nothing of Discord; actions reach the outside world through the delivery
interface they were built with.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import uuid

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.clock import Clock, SystemClock
from runner.engine.core import (
    MAX_ATTEMPTS,
    RETRY_SECONDS,
    CloseParked,
    DefinitionKey,
    RunKey,
    RunnerSettings,
    TickReport,
    serving_settings,
)
from runner.engine.inprocess import InProcess
from runner.engine.occurrences import Materialising
from runner.engine.reclaim import Reclaiming
from runner.engine.retention import Pruned, Pruning
from runner.registry import ActionRegistry
from runner.sql import run_leases

__all__ = [
    "MAX_ATTEMPTS",
    "RETRY_SECONDS",
    "CloseParked",
    "Pruned",
    "Runner",
    "RunnerSettings",
    "TickReport",
    "default_owner",
    "serving_settings",
]


def default_owner() -> str:
    """Who holds a lease: host, process and a random tag, so two runners never share an id."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Runner(Reclaiming, Materialising, Pruning, InProcess):
    MAX_ATTEMPTS = MAX_ATTEMPTS
    RETRY_SECONDS = RETRY_SECONDS

    def __init__(
        self,
        engine: AsyncEngine,
        registry: ActionRegistry,
        *,
        clock: Clock | None = None,
        owner: str | None = None,
        settings: RunnerSettings | None = None,
        versions: catalog.VersionCache | None = None,
        close_parked: CloseParked | None = None,
    ) -> None:
        self.engine = engine
        self.close_parked = close_parked
        self.registry = registry
        self.clock = clock or SystemClock()
        self.owner = owner or default_owner()
        self.settings = settings or RunnerSettings()
        self.versions = versions or catalog.VersionCache()
        self._tick_lock = asyncio.Lock()
        self._gate = asyncio.Semaphore(self.settings.concurrent_runs)
        self._detached = set()
        self._drives = {}
        self._closing = False
        self._wake_held = asyncio.Event()
        self._housekept_at: dt.datetime | None = None
        self._prune_error: str | None = None
        self.after_drive = None
        self._last_error: dict[RunKey | DefinitionKey, str] = {}

    async def tick(self) -> TickReport:
        """Advance everything that is due. Database errors in the housekeeping stages propagate
        (the caller backs off); one run's failure is logged and never stops the others."""
        async with self._tick_lock:
            self.wake_held()
            report = TickReport()
            now = self.clock.now()
            every = dt.timedelta(seconds=self.settings.housekeeping_seconds)
            housekeeping = (
                self._housekept_at is None or now - self._housekept_at >= every or now < self._housekept_at
            )
            if housekeeping:
                await self._reclaim(report)
                await self._mark_stalled(report)
                await self._materialise(report)
                await self._mark_missed(report)
                self._housekept_at = now
            await self._advance_due(report)
            if housekeeping:
                # After the advance: pruning makes nothing due, so nothing due waits for it.
                await self._prune(report)
            return report

    async def next_wake(self) -> dt.datetime | None:
        async with self.engine.connect() as conn:
            return await run_leases.next_wake(conn, self.clock.now())
