"""Reminders: the messages a scheduled occurrence sends before it starts.

A reminder is a step of its run (phase ``REMINDERS_PHASE``), created with the run, and the run's
``wake_at`` is its earliest pending reminder or its start, so the tick's one due query finds it:
a scheduled run due before its start is a *reminder visit*, not a start. The visit holds the
run's lease (taken while the run is still ``scheduled`` and given back by ``advance``, as for a
drive), and for each reminder due: one whose moment passed longer than the
definition's grace ago is skipped and logged, never sent late; any other is claimed (the claim
commits before the action runs, and only while the run is still ``scheduled``), performed like
a step, with its own idempotency key as the nonce, and settled. A failed reminder is logged and
nothing more: it never pauses, fails or delays its run. The claim, the perform and the reading
of the answer are the step code's (``steps``); only what a settle logs and does to the run is a
reminder's own. The visit answers the wake of the next reminder or the start, which the lease
goes back with unless a control nudged the run meanwhile.

The start skips what is still pending, in its own transaction (``skip_at_start``): a reminder
saying "starts in 15 minutes" must never come after the start.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import retry_on_conflict
from runner.definitions import EventDefinition
from runner.engine import steps
from runner.engine.context import EngineContext
from runner.engine.core import DriveOutcome, Lease, TickReport, log
from runner.history import ReminderFailed, ReminderSent, ReminderSkip, ReminderSkipped, StepRetry, record
from runner.records import DueRun, RunRecord, StepRecord
from runner.reminder_rules import lead_of, moment_of
from runner.sql import reminders as reminders_sql
from runner.sql import runs as runs_sql
from runner.sql import step_leases
from runner.states import ActionOutcome, RunStatus, StepStatus

STARTED_NOTE = "the event has started"


async def skip_at_start(conn: AsyncConnection, run_id: int, now: dt.datetime) -> int:
    """In the start's transaction: the reminders still pending are skipped (and logged)."""
    skipped = await reminders_sql.skip(conn, await reminders_sql.pending_ids(conn, run_id), STARTED_NOTE, now)
    for step_id in skipped:
        await record(conn, run_id, ReminderSkipped(ReminderSkip.RUN_STARTED), now, step_id=step_id)
    return len(skipped)


def is_reminder_visit(due: DueRun, now: dt.datetime) -> bool:
    return due.status is RunStatus.SCHEDULED and due.scheduled_for is not None and due.scheduled_for > now


async def visit(ctx: EngineContext, lease: Lease, run: RunRecord, report: TickReport) -> DriveOutcome:
    """Send what is due of a scheduled run's reminders, under the run's lease (``advance``
    takes it and gives it back); answer the wake of the next reminder or the start."""
    await _send_due(ctx, lease, run, report)
    async with ctx.engine.connect() as conn:
        now_run = await runs_sql.get(conn, lease.run_id)
        following = await reminders_sql.next_pending_due(conn, lease.run_id)
    if now_run is None:
        return DriveOutcome()
    starts = now_run.scheduled_for
    return DriveOutcome(starts if following is None else min(following, starts))


async def _send_due(ctx: EngineContext, lease: Lease, run: RunRecord, report: TickReport) -> None:
    """Every reminder of the leased run that is due now, in order of their moments."""
    if run.status is not RunStatus.SCHEDULED:
        return
    async with ctx.engine.connect() as conn:
        definition = await ctx.versions.get(conn, run.version_id)
        pending = await reminders_sql.pending(conn, run.id)
    for step in pending:
        now = ctx.clock.now()
        if run.scheduled_for <= now or (step.due_at is not None and step.due_at > now):
            # The start is due (and skips the rest), or nothing more is due yet.
            break
        moment = moment_of(definition, step.seq, run.scheduled_for) or step.due_at or now
        late = max((now - moment).total_seconds(), 0.0)
        if late > definition.grace_seconds:
            await _skip_late(ctx, run, definition, step, late, now)
            continue
        if not await _send_one(ctx, lease, run, definition, step, report, late):
            break


@retry_on_conflict
async def _skip_late(
    ctx: EngineContext,
    run: RunRecord,
    definition: EventDefinition,
    step: StepRecord,
    late: float,
    now: dt.datetime,
) -> None:
    async with ctx.engine.begin() as conn:
        note = f"not sent: {late:.0f} s late, past the grace of {definition.grace_seconds} s"
        if await reminders_sql.skip(conn, [step.id], note, now):
            skipped = ReminderSkipped(
                ReminderSkip.LATE, before=lead_of(definition, step.seq), late_seconds=late
            )
            await record(conn, run.id, skipped, now, step_id=step.id)
    log.warning(
        "run %s: reminder %s skipped, %.0f s past its moment (grace %s s)",
        run.id,
        step.seq,
        late,
        definition.grace_seconds,
        extra={"run_id": run.id, "step_id": step.id},
    )


async def _send_one(
    ctx: EngineContext,
    lease: Lease,
    run: RunRecord,
    definition: EventDefinition,
    step: StepRecord,
    report: TickReport,
    late: float,
) -> bool:
    """Claim (committed), perform, settle, as any step. False when the claim was refused: the
    run started, ended or changed hands, or the reminder was settled by someone else."""
    if not await steps.claim_step(ctx, lease, step, reminder=True):
        return False
    answer = await steps.perform_claimed(ctx, lease, run, step, report)
    if answer is None:
        return False
    await _settle(ctx, run, definition, step, steps.settlement(ctx, step, answer), late)
    return True


@retry_on_conflict
async def _settle(
    ctx: EngineContext,
    run: RunRecord,
    definition: EventDefinition,
    step: StepRecord,
    settled: steps.Settlement,
    late: float,
) -> None:
    """A reminder settles whatever its run did meanwhile, and its failure is its own: logged,
    never acting on the run."""
    now = ctx.clock.now()
    before = lead_of(definition, step.seq)
    output, error = settled.answer.output, settled.error
    async with ctx.engine.begin() as conn:
        match settled.outcome:
            case ActionOutcome.DONE | ActionOutcome.PARKED:
                if await step_leases.finish(
                    conn, step.id, ctx.owner, StepStatus.DONE, now, result=output, reminder=True
                ):
                    sent = ReminderSent(
                        before=before or 0.0,
                        starts_at=run.scheduled_for,
                        attempts=settled.attempts,
                        late_seconds=round(late, 3) if late >= 1 else None,
                    )
                    await record(conn, run.id, sent, now, step_id=step.id)
                return
            case ActionOutcome.RETRY:
                due = steps.retry_due(ctx, now)
                if await step_leases.reschedule(conn, step.id, ctx.owner, due, error, now, reminder=True):
                    await record(conn, run.id, StepRetry(settled.attempts, error, due), now, step_id=step.id)
                return
            case ActionOutcome.TERMINAL:
                if await step_leases.finish(
                    conn,
                    step.id,
                    ctx.owner,
                    StepStatus.FAILED,
                    now,
                    error=error,
                    result=output,
                    reminder=True,
                ):
                    failed = ReminderFailed(error[:300], settled.attempts, before)
                    await record(conn, run.id, failed, now, step_id=step.id)
    log.warning(
        "run %s: reminder %s failed: %s",
        run.id,
        step.seq,
        error,
        extra={"run_id": run.id, "step_id": step.id},
    )
