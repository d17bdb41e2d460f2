"""The runner: one ``tick`` that moves every due run as far as it can.

A tick is its list of stages (``Runner.stages``), each an object in its own module with
``async def run(ctx) -> StageResult``, over one small shared context (``context.EngineContext``):

1. **Reclaim** (``reclaim``) steps whose runner died: give up on spent ones first, then hand the
   rest back, never touching ``attempts`` and never touching a parked cue. Stale run leases are
   dropped; then **MarkStalled** marks ``stalled`` the runs nobody advances.
2. **Materialise** (``occurrences``) upcoming occurrences of once/cron definitions, and
   **MarkMissed** those past their own definition's grace window.
3. **Advance** (``advance``) each due run, concurrently, one step at a time (``steps``: claim,
   perform, settle; a scheduled run's reminders through the same step code, ``reminders``),
   across phase boundaries (``phases``) to completion, and give the lease back with the time
   it next needs a tick, unless the hold policy (``inprocess``) keeps it for a wait due soon.
4. **Cleanup** (``cleanup``): undo, latest first and each once, what the runs a cancel with
   cleanup left ``pending`` recorded in their ledger.
5. **Prune** (``retention``) the history of runs that ended longer ago than the retention
   period, with the housekeeping and after the advance: one small batch per pass, a summary of
   each run kept, so a due step never waits behind it.

The housekeeping stages run once per ``housekeeping_seconds``; the ticks between only advance.
What happens in the runner that others in the process follow goes through its event bus
(``runner.bus``). The engine knows nothing of Discord; actions reach the outside world through
the delivery interface they were built with.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import uuid
from collections.abc import Awaitable
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.approvals import RequestApproval
from runner.bus import LocalEventBus, TickFinished, TickStarted
from runner.clock import Clock, SystemClock
from runner.engine.advance import Advance
from runner.engine.cleanup import Cleanup
from runner.engine.context import EngineContext
from runner.engine.core import (
    MAX_ATTEMPTS,
    RETRY_SECONDS,
    CloseParked,
    RunnerSettings,
    StageResult,
    TickReport,
    serving_settings,
)
from runner.engine.inprocess import InProcess
from runner.engine.occurrences import MarkMissed, Materialise
from runner.engine.reclaim import MarkStalled, Reclaim
from runner.engine.retention import Prune, Pruned
from runner.lifecycle import Handover
from runner.registry import ActionRegistry
from runner.sql import run_leases
from runner.states import RunStatus

__all__ = [
    "MAX_ATTEMPTS",
    "RETRY_SECONDS",
    "CloseParked",
    "Pruned",
    "Runner",
    "RunnerSettings",
    "Stage",
    "TickReport",
    "default_owner",
    "serving_settings",
]


def default_owner() -> str:
    """Who holds a lease: host, process and a random tag, so two runners never share an id."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Stage(Protocol):
    # Runs only when the housekeeping is due (the ticks between only advance what is due).
    housekeeping: bool

    def run(self, ctx: EngineContext) -> Awaitable[StageResult]: ...


class Runner:
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
        bus: LocalEventBus | None = None,
        request_approval: RequestApproval | None = None,
    ) -> None:
        self.bus = bus or LocalEventBus()
        self.in_process = InProcess(self.bus)
        self.ctx = EngineContext(
            engine=engine,
            registry=registry,
            clock=clock or SystemClock(),
            owner=owner or default_owner(),
            settings=settings or RunnerSettings(),
            versions=versions or catalog.VersionCache(),
            bus=self.bus,
            hold=self.in_process,
            close_parked=close_parked,
            request_approval=request_approval,
        )
        self.advance = Advance()
        self.retention = Prune()
        self.stages: tuple[Stage, ...] = (
            Reclaim(),
            MarkStalled(),
            Materialise(),
            MarkMissed(),
            self.advance,
            # After the advance: pruning makes nothing due, so nothing due waits for it.
            self.retention,
            # Undo what cancelled runs did (``cleanup``): one indexed read when nothing is pending.
            Cleanup(self.bus),
        )
        self._tick_lock = asyncio.Lock()
        self._housekept_at: dt.datetime | None = None

    # The collaborators live in the context the stages share, given once to the constructor.

    @property
    def engine(self) -> AsyncEngine:
        return self.ctx.engine

    @property
    def registry(self) -> ActionRegistry:
        return self.ctx.registry

    @property
    def clock(self) -> Clock:
        return self.ctx.clock

    @property
    def owner(self) -> str:
        return self.ctx.owner

    @property
    def settings(self) -> RunnerSettings:
        return self.ctx.settings

    @property
    def versions(self) -> catalog.VersionCache:
        return self.ctx.versions

    async def tick(self) -> TickReport:
        """Advance everything that is due. Database errors in the housekeeping stages propagate
        (the caller backs off); one run's failure is logged and never stops the others."""
        async with self._tick_lock:
            self.bus.publish(TickStarted())
            report = TickReport()
            now = self.clock.now()
            every = dt.timedelta(seconds=self.settings.housekeeping_seconds)
            housekeeping = (
                self._housekept_at is None or now - self._housekept_at >= every or now < self._housekept_at
            )
            for stage in self.stages:
                if stage.housekeeping and not housekeeping:
                    continue
                report.absorb(await stage.run(self.ctx))
            if housekeeping:
                self._housekept_at = now
            self.bus.publish(TickFinished(report))
            return report

    async def next_wake(self) -> dt.datetime | None:
        async with self.engine.connect() as conn:
            return await run_leases.next_wake(conn, self.clock.now())

    async def prune_pass(self, cutoff: dt.datetime) -> Pruned:
        """One bounded retention pass (``retention.Prune.prune_pass``)."""
        return await self.retention.prune_pass(self.ctx, cutoff)

    # The controls' driver (``Controls(driver=runner)``) and the in-process drives.

    def handover(self, first_action_id: str, now: dt.datetime) -> Handover | None:
        return self.in_process.handover(self.ctx, first_action_id, now)

    def drive_started(self, started: catalog.StartedHere) -> None:
        self.in_process.drive_started(self.ctx, started)

    def wake_held(self) -> None:
        self.in_process.wake_held()

    async def until_ended(self, run_id: int, *, poll_seconds: float = 1.0) -> RunStatus:
        return await self.in_process.until_ended(self.ctx, run_id, poll_seconds=poll_seconds)

    async def aclose(self, *, grace_seconds: float = 5.0) -> None:
        await self.in_process.aclose(grace_seconds=grace_seconds)
