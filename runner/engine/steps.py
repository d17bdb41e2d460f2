"""One step: claim it, perform its action, and settle what it answered, one function per
outcome (done, parked, retry, failed), each in the settle's transaction."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from runner import approvals
from runner.db import retry_on_conflict
from runner.definitions import EventDefinition
from runner.dispatch import Classified, perform
from runner.engine import claims, phases
from runner.engine.claims import lease_kept_on_rollback
from runner.engine.cleanup import late_undo, record_undo, undo_from
from runner.engine.conditions import skipped_by_condition
from runner.engine.context import EngineContext
from runner.engine.core import (
    Go,
    Lease,
    Orphaned,
    Stop,
    TickReport,
    Verdict,
    apply_on_failure,
    degrade,
    log,
    recover,
    step_envelope,
)
from runner.history import (
    LineBatch,
    RunEnding,
    StepCancelled,
    StepDone,
    StepFailed,
    StepParked,
    StepRetry,
    how_run_ended,
    record,
    written_together,
)
from runner.records import RunRecord, StepRecord
from runner.sql import runs as runs_sql
from runner.sql import step_leases
from runner.sql import steps as steps_sql
from runner.states import ActionOutcome, Health, StepStatus


@dataclass(frozen=True)
class _Then:
    """What a settle may do next in its transaction: claim ``following``, or (``last``: the
    step was the phase's last open one) close the phase of ``definition``."""

    definition: EventDefinition
    following: StepRecord | None
    last: bool


async def run_step(
    ctx: EngineContext,
    lease: Lease,
    run: RunRecord,
    definition: EventDefinition,
    step: StepRecord,
    report: TickReport,
    *,
    claimed: bool = False,
    following: StepRecord | None = None,
    may_claim_next: bool = True,
) -> Verdict:
    """Claim (unless the previous settle already did), perform, settle. The settle's
    transaction also claims ``following`` when it is due (``Go.NEXT_CLAIMED``), or, after
    the phase's last open step, closes the phase (``Go.CROSSED``, ``Go.ENDED``): one
    transaction per step, each step's claim committed before its action runs, and acted on
    only while its lease covers the action (``claims``)."""
    if await skipped_by_condition(ctx, run, definition, step):
        return Go.REREAD  # its cue's answer says it does not run: the run carries on past it
    if not claimed and not await claim_step(ctx, lease, step):
        # Paused or cancelled underneath us, or a human settled this step: look again.
        return Go.REREAD
    outcome = await perform_claimed(ctx, lease, run, step, report)
    if outcome is None:
        return Go.REREAD
    then = _Then(definition, following if may_claim_next else None, last=following is None)
    verdict = await _settle(ctx, lease, run, step, settlement(ctx, step, outcome), then)
    if isinstance(verdict, Orphaned):
        await _close_parked(ctx, verdict)
        return Go.REREAD
    return verdict


async def _close_parked(ctx: EngineContext, orphan: Orphaned) -> None:
    """Close what a parked answer posted for a run that had already ended (a cue's buttons).
    The step is cancelled whatever the front end manages: a failure here is logged only."""
    ids = {"run_id": orphan.run_id, "step_id": orphan.step_id}
    if ctx.close_parked is None:
        log.warning(
            "run %s step %s: cancelled after its run ended; nothing closes what it posted",
            orphan.run_id,
            orphan.step_id,
            extra=ids,
        )
        return
    try:
        await ctx.close_parked(orphan.run_id, orphan.step_id, orphan.output, orphan.ended)
    except Exception:
        log.exception(
            "run %s step %s: could not close what the step posted",
            orphan.run_id,
            orphan.step_id,
            extra=ids,
        )


async def perform_claimed(
    ctx: EngineContext, lease: Lease, run: RunRecord, step: StepRecord, report: TickReport
) -> Classified | None:
    """Perform a step (or a reminder) whose claim committed, if its lease still covers the
    action (``claims``); ``None`` when it does not and the step is left to the reclaim."""
    if not await claims.still_leased(ctx, lease, step):
        return None
    if approvals.held_back(ctx, step):
        # Its action's risk needs a staff approval first: the request parks it as a cue parks.
        return await approvals.ask(ctx, run, step)
    report.steps_dispatched += 1
    return await perform(ctx.registry, step_envelope(run, step), step.action_id)


@dataclass(frozen=True)
class Settlement:
    """What a performed step's answer comes to once its attempts are counted: ``outcome`` is
    ``RETRY`` only while attempts are left (spent, it is ``TERMINAL``, with the error saying
    so)."""

    outcome: ActionOutcome
    answer: Classified
    attempts: int
    error: str


def settlement(ctx: EngineContext, step: StepRecord, answer: Classified) -> Settlement:
    attempts = step.attempts + 1  # the row was read before our claim counted this one
    # Every failure ``dispatch`` answers carries its error; this names the action all the same.
    error = answer.error or f"{step.action_id} failed"
    outcome = answer.outcome
    if outcome is ActionOutcome.RETRY and attempts >= ctx.settings.max_attempts:
        outcome, error = ActionOutcome.TERMINAL, f"gave up after {attempts} attempts: {error}"
    return Settlement(outcome, answer, attempts, error)


def retry_due(ctx: EngineContext, now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(seconds=ctx.settings.retry_seconds)


@retry_on_conflict
async def claim_step(ctx: EngineContext, lease: Lease, step: StepRecord, *, reminder: bool = False) -> bool:
    with lease_kept_on_rollback(lease):
        async with ctx.engine.begin() as conn:
            return await claim_in(ctx, conn, lease, step, ctx.clock.now(), reminder=reminder)


async def claim_in(
    ctx: EngineContext,
    conn: AsyncConnection,
    lease: Lease,
    step: StepRecord,
    now: dt.datetime,
    *,
    reminder: bool = False,
) -> bool:
    """Lease the step (renewing the run's lease first when the step could outlast it).
    The caller's transaction must be wrapped in ``lease_kept_on_rollback``."""
    action = ctx.registry.get(step.action_id)
    step_lease = claims.step_lease(ctx, step, now)
    await claims.renew_for_claim(ctx, conn, lease, step_lease)
    claimed = await step_leases.claim(
        conn,
        step.id,
        run_id=lease.run_id,
        owner=ctx.owner,
        lease_until=step_lease,
        now=now,
        action_version=action.version if action else None,
        reminder=reminder,
    )
    if claimed:
        lease.claimed[step.id] = step_lease
    return claimed


@retry_on_conflict
async def _settle(
    ctx: EngineContext, lease: Lease, run: RunRecord, step: StepRecord, settled: Settlement, then: _Then
) -> Verdict | Orphaned:
    now = ctx.clock.now()
    with lease_kept_on_rollback(lease):
        return await _settle_in_one(ctx, lease, run, step, settled, then, now)


async def _settle_in_one(
    ctx: EngineContext,
    lease: Lease,
    run: RunRecord,
    step: StepRecord,
    settled: Settlement,
    then: _Then,
    now: dt.datetime,
) -> Verdict | Orphaned:
    async with ctx.engine.begin() as conn, written_together(conn) as batch:
        if run.health is Health.STALLED:
            # Before anything this settle degrades: ``degrade`` only moves ``ok``.
            await recover(conn, run.id, now)
        match settled.outcome:
            case ActionOutcome.DONE:
                verdict = await _settle_done(ctx, conn, run, step, settled, now)
                if verdict is Go.NEXT:
                    verdict = await _then(ctx, conn, batch, lease, run, step, then, now)
                return verdict
            case ActionOutcome.PARKED:
                return await _settle_parked(ctx, conn, run, step, settled.answer, now)
            case ActionOutcome.RETRY:
                return await _settle_retry(ctx, conn, run, step, settled, now)
            case ActionOutcome.TERMINAL:
                return await _settle_failed(ctx, conn, run, step, settled, now)


async def _settle_done(
    ctx: EngineContext,
    conn: AsyncConnection,
    run: RunRecord,
    step: StepRecord,
    settled: Settlement,
    now: dt.datetime,
) -> Verdict | Orphaned:
    """``running -> done``; a ``holdFor`` pushes the next pending step later (never earlier),
    or, at the end of a phase, the first step of the next one."""
    outcome = settled.answer
    if not await step_leases.finish(conn, step.id, ctx.owner, StepStatus.DONE, now, result=outcome.output):
        return await _settle_refused(ctx, conn, run.id, step, outcome, now)
    hold_until: dt.datetime | None = None
    if outcome.hold_seconds > 0:
        hold = outcome.hold_seconds
        if run.rehearsal:
            hold /= ctx.settings.rehearsal_speed
        hold_until = now + dt.timedelta(seconds=hold)
        if not await step_leases.hold_next(conn, run.id, step.phase, step.seq, hold_until):
            if not await steps_sql.has_pending_after(conn, run.id, step.phase, step.seq):
                await runs_sql.set_phase_hold(conn, run.id, hold_until)
    done = StepDone(step.action_id, settled.attempts, hold_until=hold_until)
    await record(conn, run.id, done, now, step_id=step.id)
    # What a cancel with cleanup would undo, written with the step's settle (once).
    await record_undo(ctx, conn, step, undo_from(outcome.undo), now)
    # A hold moved a due date the open steps already read do not show.
    return Go.REREAD if hold_until is not None else Go.NEXT


async def _then(
    ctx: EngineContext,
    conn: AsyncConnection,
    batch: LineBatch,
    lease: Lease,
    run: RunRecord,
    step: StepRecord,
    then: _Then,
    now: dt.datetime,
) -> Verdict:
    """What the settle of a step done (with no hold) also does in its transaction: claim the
    next step if it is due now, or close the phase after its last open step."""
    following = then.following
    if following is not None:
        due = following.due_at is None or following.due_at <= now
        if (
            following.status is StepStatus.PENDING
            and due
            and await claim_in(ctx, conn, lease, following, now)
        ):
            return Go.NEXT_CLAIMED
        return Go.NEXT
    if not then.last:
        return Go.NEXT
    return await phases.close_phase(conn, batch, run, then.definition, step.phase, now)


async def _settle_parked(
    ctx: EngineContext,
    conn: AsyncConnection,
    run: RunRecord,
    step: StepRecord,
    outcome: Classified,
    now: dt.datetime,
) -> Verdict | Orphaned:
    """Leased -> parked: only a human moves the run on from here."""
    if not await step_leases.park(conn, step.id, ctx.owner, now, result=outcome.output):
        return await _settle_refused(ctx, conn, run.id, step, outcome, now)
    await record(conn, run.id, StepParked(step.action_id), now, step_id=step.id)
    return Stop()


async def _settle_retry(
    ctx: EngineContext,
    conn: AsyncConnection,
    run: RunRecord,
    step: StepRecord,
    settled: Settlement,
    now: dt.datetime,
) -> Verdict | Orphaned:
    """A transient failure with attempts left: back to pending, due after the retry delay."""
    due, error = retry_due(ctx, now), settled.error
    if not await step_leases.reschedule(conn, step.id, ctx.owner, due, error, now):
        return await _settle_refused(ctx, conn, run.id, step, settled.answer, now)
    await record(conn, run.id, StepRetry(settled.attempts, error, due), now, step_id=step.id)
    await degrade(conn, run.id, now, f"step {step.id} is being retried: {error}")
    return Stop(due)


async def _settle_failed(
    ctx: EngineContext,
    conn: AsyncConnection,
    run: RunRecord,
    step: StepRecord,
    settled: Settlement,
    now: dt.datetime,
) -> Verdict | Orphaned:
    """A terminal failure, or attempts spent: ``failed``, then ``on_failure`` acts on the run."""
    error, output = settled.error, settled.answer.output
    if not await step_leases.finish(
        conn, step.id, ctx.owner, StepStatus.FAILED, now, error=error, result=output
    ):
        return await _settle_refused(ctx, conn, run.id, step, settled.answer, now)
    failed = StepFailed(error, action=step.action_id, attempts=settled.attempts)
    await record(conn, run.id, failed, now, step_id=step.id)
    stopped = await apply_on_failure(conn, run.id, step, error, now)
    return Stop() if stopped else Go.NEXT


async def _settle_refused(
    ctx: EngineContext,
    conn: AsyncConnection,
    run_id: int,
    step: StepRecord,
    outcome: Classified,
    now: dt.datetime,
) -> Verdict | Orphaned:
    """Our settle statement matched nothing: either the step is no longer ours (the reclaim or
    a human took it) or its run ended while it was out. The second case cancels the step, so
    it cannot stay ``running`` on a dead run, and hands back what a parked answer posted."""
    if not await step_leases.cancel_on_ended_run(conn, step.id, ctx.owner, now, result=outcome.output):
        # Not ours any more: as before, a lost park stops this run's turn, the rest look again.
        return Stop() if outcome.outcome is ActionOutcome.PARKED else Go.REREAD
    current = await runs_sql.get(conn, run_id)
    status = current.status if current is not None else None
    cancelled = StepCancelled(action=step.action_id, outcome=outcome.outcome, run_status=status)
    await record(conn, run_id, cancelled, now, step_id=step.id)
    await late_undo(ctx, conn, step, outcome, now)
    if outcome.outcome is not ActionOutcome.PARKED:
        return Go.REREAD
    if current is None:
        return Orphaned(run_id, step.id, outcome.output, RunEnding(status))
    ended = await how_run_ended(conn, run_id, current.status, current.last_error)
    return Orphaned(run_id, step.id, outcome.output, ended)
