"""Tick stage 1, and the run's health: reclaim what dead runners held; mark stalled the runs
nobody advances.

The reclaim gives up on spent steps first, then hands the rest back, never touching
``attempts`` and never touching a parked cue; stale run leases are dropped.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import retry_on_conflict
from runner.definitions import REMINDERS_PHASE
from runner.engine.context import EngineContext
from runner.engine.core import StageResult, apply_on_failure, recover
from runner.engine.reminders import STARTED_NOTE
from runner.history import (
    ReminderFailed,
    ReminderSkip,
    ReminderSkipped,
    RunStalled,
    StallReason,
    StepCancelled,
    StepFailed,
    StepReclaimed,
    record,
)
from runner.records import StaleStep, StepRecord
from runner.sql import reminders as reminders_sql
from runner.sql import run_health as health_sql
from runner.sql import run_leases, step_leases
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import Health, RunStatus, StepStatus


class Reclaim:
    """Hand back (or give up on) the steps of runners that died; drop their stale run leases."""

    # Every tick, not only at housekeeping: a dead runner's runs move as soon as its step's lease
    # runs out (the serving loop wakes then: ``run_leases.next_wake``), which is what keeps a
    # takeover inside its promise (docs/GUARANTEES.md). When nothing is stale its two reads are
    # index range scans that stop at their first row.
    housekeeping = False

    async def run(self, ctx: EngineContext) -> StageResult:
        outcome = await self._reclaim_transaction(ctx)
        return StageResult(reclaimed=outcome.reclaimed, gave_up=outcome.failed)

    @retry_on_conflict
    async def _reclaim_transaction(self, ctx: EngineContext) -> step_leases.Reclaimed:
        now = ctx.clock.now()
        outcome = step_leases.Reclaimed(0, 0)
        async with ctx.engine.begin() as conn:
            stale = await step_leases.stale(conn, now)
            if stale:
                outcome = await step_leases.reclaim_stale(
                    conn, now, ctx.settings.max_attempts, step_ids=[s.id for s in stale]
                )
                await self._after_reclaim(ctx, conn, stale, now)
            await run_leases.reclaim_stale(conn, now)
        return outcome

    async def _after_reclaim(
        self, ctx: EngineContext, conn: AsyncConnection, stale: Sequence[StaleStep], now: dt.datetime
    ) -> None:
        """Log what the reclaim did to each step and act on it. Which it was is read from the
        data the reclaim decided on: a spent step (``attempts`` as read before the reclaim, at
        the maximum) that is now failed was given up; cancelled, its run had ended; pending,
        handed back."""
        for was in stale:
            step = await steps_sql.get(conn, was.id)
            if step is None:
                continue
            if step.phase == REMINDERS_PHASE:
                await self._reminder_reclaimed(ctx, conn, step, was.attempts, now)
            elif step.status is StepStatus.FAILED and was.attempts >= ctx.settings.max_attempts:
                await _gave_up(conn, step, now)
            elif step.status is StepStatus.CANCELLED:
                await record(conn, step.run_id, StepCancelled(reason="run ended"), now, step_id=step.id)
            elif step.status is StepStatus.PENDING:
                await _handed_back(ctx, conn, step, now)
            # Its runner is dead to the run too: the run is taken over at this tick, not when its
            # own lease (renewed to outlast the step's) runs out as well (issue 26 item 6).
            if was.owner is not None:
                await run_leases.let_go_of_dead_holder(conn, step.run_id, was.owner)
            await run_leases.wake_now(conn, step.run_id, now)

    async def _reminder_reclaimed(
        self,
        ctx: EngineContext,
        conn: AsyncConnection,
        step: StepRecord,
        attempts_before: int,
        now: dt.datetime,
    ) -> None:
        """A reminder's runner died: its failure never acts on the run (no ``on_failure``, no
        stall), and one handed back after its run started is skipped, never sent after the start."""
        if step.status is StepStatus.FAILED and attempts_before >= ctx.settings.max_attempts:
            await record(
                conn, step.run_id, ReminderFailed(step_leases.GAVE_UP, step.attempts), now, step_id=step.id
            )
        elif step.status is StepStatus.CANCELLED:
            await record(conn, step.run_id, StepCancelled(reason="run ended"), now, step_id=step.id)
        elif step.status is StepStatus.PENDING:
            await record(conn, step.run_id, StepReclaimed(step.attempts), now, step_id=step.id)
            run = await runs_sql.get(conn, step.run_id)
            if run is not None and run.status is not RunStatus.SCHEDULED:
                if await reminders_sql.skip(conn, [step.id], STARTED_NOTE, now):
                    skipped = ReminderSkipped(ReminderSkip.RUN_STARTED)
                    await record(conn, step.run_id, skipped, now, step_id=step.id)


async def _gave_up(conn: AsyncConnection, step: StepRecord, now: dt.datetime) -> None:
    await record(conn, step.run_id, StepFailed(step_leases.GAVE_UP), now, step_id=step.id)
    await recover(conn, step.run_id, now)
    await apply_on_failure(conn, step.run_id, step, step_leases.GAVE_UP, now)


async def _handed_back(ctx: EngineContext, conn: AsyncConnection, step: StepRecord, now: dt.datetime) -> None:
    await record(conn, step.run_id, StepReclaimed(step.attempts), now, step_id=step.id)
    reclaims = await health_sql.step_reclaims(conn, step.run_id, step.id)
    if reclaims >= ctx.settings.stall_reclaims:
        event = functools.partial(RunStalled, StallReason.RECLAIMED, step_id=step.id, reclaims=reclaims)
        await _stall(conn, step.run_id, now, event)


class MarkStalled:
    """Runs far past their wake that nobody holds are marked ``stalled``."""

    housekeeping = True

    @retry_on_conflict
    async def run(self, ctx: EngineContext) -> StageResult:
        """Runs far past their wake that nobody holds. The advance that follows in this same tick
        usually moves them on (and ``_recover`` clears it); the two log lines then say how long
        the run stood still, which is what staff want to know after an outage."""
        now = ctx.clock.now()
        before = now - dt.timedelta(seconds=ctx.settings.stall_after_seconds)
        stalled = 0
        async with ctx.engine.begin() as conn:
            for run in await health_sql.find_overdue(conn, now, before):
                overdue = (now - run.wake_at).total_seconds()
                event = functools.partial(
                    RunStalled, StallReason.OVERDUE, wake_at=run.wake_at, overdue_seconds=overdue
                )
                if await _stall(conn, run.id, now, event, health=run.health):
                    stalled += 1
        return StageResult(stalled=stalled)


async def _stall(
    conn: AsyncConnection,
    run_id: int,
    now: dt.datetime,
    event: Callable[[Health], RunStalled],
    *,
    health: Health | None = None,
) -> bool:
    """Mark the run stalled and log ``run.stalled`` once (with the health it had)."""
    if health is None:
        run = await runs_sql.get(conn, run_id)
        if run is None:
            return False
        health = run.health
    if health is Health.STALLED or not await health_sql.stall(conn, run_id, health, now):
        return False
    await record(conn, run_id, event(health), now)
    return True
