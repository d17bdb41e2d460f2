"""One step: claim it, perform its action, and settle what it answered, one function per
outcome (done, parked, retry, failed), each in the settle's transaction."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import retry_on_conflict
from runner.definitions import EventDefinition
from runner.dispatch import Classified, perform
from runner.engine.claims import Claims, lease_kept_on_rollback
from runner.engine.core import Go, Lease, Orphaned, Stop, TickReport, Verdict, log, step_envelope
from runner.engine.phases import Phasing
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
from runner.states import Health, StepStatus


@dataclass(frozen=True)
class _Then:
    """What a settle may do next in its transaction: claim ``following``, or (``last``: the
    step was the phase's last open one) close the phase of ``definition``."""

    definition: EventDefinition
    following: StepRecord | None
    last: bool


class Stepping(Phasing, Claims):
    async def _run_step(
        self,
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
        if not claimed and not await self._claim_step(lease, step):
            # Paused or cancelled underneath us, or a human settled this step: look again.
            return Go.REREAD
        if not await self._still_leased(lease, step):
            return Go.REREAD
        report.steps_dispatched += 1
        envelope = step_envelope(run, step)
        outcome = await perform(self.registry, envelope, step.action_id)
        attempts = step.attempts + 1  # the row was read before our claim counted this one
        then = _Then(definition, following if may_claim_next else None, last=following is None)
        verdict = await self._settle(lease, run, step, attempts, outcome, then)
        if isinstance(verdict, Orphaned):
            await self._close_parked(verdict)
            return Go.REREAD
        return verdict

    async def _close_parked(self, orphan: Orphaned) -> None:
        """Close what a parked answer posted for a run that had already ended (a cue's buttons).
        The step is cancelled whatever the front end manages: a failure here is logged only."""
        ids = {"run_id": orphan.run_id, "step_id": orphan.step_id}
        if self.close_parked is None:
            log.warning(
                "run %s step %s: cancelled after its run ended; nothing closes what it posted",
                orphan.run_id,
                orphan.step_id,
                extra=ids,
            )
            return
        try:
            await self.close_parked(orphan.run_id, orphan.step_id, orphan.output, orphan.ended)
        except Exception:
            log.exception(
                "run %s step %s: could not close what the step posted",
                orphan.run_id,
                orphan.step_id,
                extra=ids,
            )

    @retry_on_conflict
    async def _claim_step(self, lease: Lease, step: StepRecord) -> bool:
        with lease_kept_on_rollback(lease):
            async with self.engine.begin() as conn:
                return await self._claim_in(conn, lease, step, self.clock.now())

    async def _claim_in(
        self, conn: AsyncConnection, lease: Lease, step: StepRecord, now: dt.datetime
    ) -> bool:
        """Lease the step (renewing the run's lease first when the step could outlast it).
        The caller's transaction must be wrapped in ``lease_kept_on_rollback``."""
        action = self.registry.get(step.action_id)
        step_lease = self._step_lease(step, now)
        await self._renew_for_claim(conn, lease, step_lease, now)
        claimed = await step_leases.claim(
            conn,
            step.id,
            run_id=lease.run_id,
            owner=self.owner,
            lease_until=step_lease,
            now=now,
            action_version=action.version if action else None,
        )
        if claimed:
            lease.claimed[step.id] = step_lease
        return claimed

    @retry_on_conflict
    async def _settle(
        self, lease: Lease, run: RunRecord, step: StepRecord, attempts: int, outcome: Classified, then: _Then
    ) -> Verdict | Orphaned:
        now = self.clock.now()
        with lease_kept_on_rollback(lease):
            return await self._settle_in_one(lease, run, step, attempts, outcome, then, now)

    async def _settle_in_one(
        self,
        lease: Lease,
        run: RunRecord,
        step: StepRecord,
        attempts: int,
        outcome: Classified,
        then: _Then,
        now: dt.datetime,
    ) -> Verdict | Orphaned:
        async with self.engine.begin() as conn, written_together(conn) as batch:
            if run.health is Health.STALLED:
                # Before anything this settle degrades: ``degrade`` only moves ``ok``.
                await self._recover(conn, run.id, now)
            if outcome.outcome == "done":
                verdict = await self._settle_done(conn, run, step, attempts, outcome, now)
                if verdict is Go.NEXT:
                    verdict = await self._then(conn, batch, lease, run, step, then, now)
                return verdict
            if outcome.outcome == "parked":
                return await self._settle_parked(conn, run, step, outcome, now)
            error = outcome.error or "failed"
            if outcome.outcome == "retry" and attempts < self.settings.max_attempts:
                return await self._settle_retry(conn, run, step, attempts, outcome, error, now)
            if outcome.outcome == "retry":
                error = f"gave up after {attempts} attempts: {error}"
            return await self._settle_failed(conn, run, step, attempts, outcome, error, now)

    async def _settle_done(
        self,
        conn: AsyncConnection,
        run: RunRecord,
        step: StepRecord,
        attempts: int,
        outcome: Classified,
        now: dt.datetime,
    ) -> Verdict | Orphaned:
        """``running -> done``; a ``holdFor`` pushes the next pending step later (never earlier),
        or, at the end of a phase, the first step of the next one."""
        if not await step_leases.finish(
            conn, step.id, self.owner, StepStatus.DONE, now, result=outcome.output
        ):
            return await self._settle_refused(conn, run.id, step, outcome, now)
        hold_until: dt.datetime | None = None
        if outcome.hold_seconds > 0:
            hold = outcome.hold_seconds
            if run.rehearsal:
                hold /= self.settings.rehearsal_speed
            hold_until = now + dt.timedelta(seconds=hold)
            if not await step_leases.hold_next(conn, run.id, step.phase, step.seq, hold_until):
                if not await steps_sql.has_pending_after(conn, run.id, step.phase, step.seq):
                    await runs_sql.set_phase_hold(conn, run.id, hold_until)
        await record(
            conn, run.id, StepDone(step.action_id, attempts, hold_until=hold_until), now, step_id=step.id
        )
        # A hold moved a due date the open steps already read do not show.
        return Go.REREAD if hold_until is not None else Go.NEXT

    async def _then(
        self,
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
                and await self._claim_in(conn, lease, following, now)
            ):
                return Go.NEXT_CLAIMED
            return Go.NEXT
        if not then.last:
            return Go.NEXT
        return await self._close_phase(conn, batch, run, then.definition, step.phase, now)

    async def _settle_parked(
        self, conn: AsyncConnection, run: RunRecord, step: StepRecord, outcome: Classified, now: dt.datetime
    ) -> Verdict | Orphaned:
        """Leased -> parked: only a human moves the run on from here."""
        if not await step_leases.park(conn, step.id, self.owner, now, result=outcome.output):
            return await self._settle_refused(conn, run.id, step, outcome, now)
        await record(conn, run.id, StepParked(step.action_id), now, step_id=step.id)
        return Stop()

    async def _settle_retry(
        self,
        conn: AsyncConnection,
        run: RunRecord,
        step: StepRecord,
        attempts: int,
        outcome: Classified,
        error: str,
        now: dt.datetime,
    ) -> Verdict | Orphaned:
        """A transient failure with attempts left: back to pending, due after the retry delay."""
        due = now + dt.timedelta(seconds=self.settings.retry_seconds)
        if not await step_leases.reschedule(conn, step.id, self.owner, due, error, now):
            return await self._settle_refused(conn, run.id, step, outcome, now)
        await record(conn, run.id, StepRetry(attempts, error, due), now, step_id=step.id)
        await self._degrade(conn, run.id, now, f"step {step.id} is being retried: {error}")
        return Stop(due)

    async def _settle_failed(
        self,
        conn: AsyncConnection,
        run: RunRecord,
        step: StepRecord,
        attempts: int,
        outcome: Classified,
        error: str,
        now: dt.datetime,
    ) -> Verdict | Orphaned:
        """A terminal failure, or attempts spent: ``failed``, then ``on_failure`` acts on the run."""
        if not await step_leases.finish(
            conn, step.id, self.owner, StepStatus.FAILED, now, error=error, result=outcome.output
        ):
            return await self._settle_refused(conn, run.id, step, outcome, now)
        failed = StepFailed(error, action=step.action_id, attempts=attempts)
        await record(conn, run.id, failed, now, step_id=step.id)
        stopped = await self._apply_on_failure(conn, run.id, step, error, now)
        return Stop() if stopped else Go.NEXT

    async def _settle_refused(
        self, conn: AsyncConnection, run_id: int, step: StepRecord, outcome: Classified, now: dt.datetime
    ) -> Verdict | Orphaned:
        """Our settle statement matched nothing: either the step is no longer ours (the reclaim or
        a human took it) or its run ended while it was out. The second case cancels the step, so
        it cannot stay ``running`` on a dead run, and hands back what a parked answer posted."""
        if not await step_leases.cancel_on_ended_run(conn, step.id, self.owner, now, result=outcome.output):
            # Not ours any more: as before, a lost park stops this run's turn, the rest look again.
            return Stop() if outcome.outcome == "parked" else Go.REREAD
        current = await runs_sql.get(conn, run_id)
        status = current.status.value if current is not None else "gone"
        cancelled = StepCancelled(action=step.action_id, outcome=outcome.outcome, run_status=status)
        await record(conn, run_id, cancelled, now, step_id=step.id)
        if outcome.outcome != "parked":
            return Go.REREAD
        if current is None:
            return Orphaned(run_id, step.id, outcome.output, RunEnding(status))
        ended = await how_run_ended(conn, run_id, current.status, current.last_error)
        return Orphaned(run_id, step.id, outcome.output, ended)
