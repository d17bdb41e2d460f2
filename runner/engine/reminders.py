"""Reminders: the messages a scheduled occurrence sends before it starts.

A reminder is a step of its run (phase ``REMINDERS_PHASE``), created with the run, and the run's
``wake_at`` is its earliest pending reminder or its start, so the tick's one due query finds it:
a scheduled run due before its start is a *reminder visit*, not a start. The visit leases the
run (still ``scheduled``), and for each reminder due: one whose moment passed longer than the
definition's grace ago is skipped and logged, never sent late; any other is claimed (the claim
commits before the action runs, and only while the run is still ``scheduled``), performed like
a step, with its own idempotency key as the nonce, and settled. A failed reminder is logged and
nothing more: it never pauses, fails or delays its run. The lease goes back with the wake of the
next reminder or the start, unless a control nudged the run meanwhile.

The start skips what is still pending, in its own transaction (``skip_at_start``): a reminder
saying "starts in 15 minutes" must never come after the start.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import retry_on_conflict
from runner.definitions import EventDefinition
from runner.dispatch import Classified, perform
from runner.engine.claims import Claims, lease_kept_on_rollback
from runner.engine.core import Lease, TickReport, log, step_envelope
from runner.history import ReminderFailed, ReminderSent, ReminderSkip, ReminderSkipped, StepRetry, record
from runner.records import DueRun, RunRecord, StepRecord
from runner.sql import reminders as reminders_sql
from runner.sql import run_leases
from runner.sql import runs as runs_sql
from runner.states import RunStatus, StepStatus

STARTED_NOTE = "the event has started"


def _lead(definition: EventDefinition, seq: int) -> float | None:
    return definition.reminders[seq].before if seq < len(definition.reminders) else None


async def skip_at_start(conn: AsyncConnection, run_id: int, now: dt.datetime) -> int:
    """In the start's transaction: the reminders still pending are skipped (and logged)."""
    skipped = await reminders_sql.skip(conn, await reminders_sql.pending_ids(conn, run_id), STARTED_NOTE, now)
    for step_id in skipped:
        await record(conn, run_id, ReminderSkipped(ReminderSkip.RUN_STARTED), now, step_id=step_id)
    return len(skipped)


class Reminding(Claims):
    def _is_reminder_visit(self, due: DueRun, now: dt.datetime) -> bool:
        return due.status is RunStatus.SCHEDULED and due.scheduled_for is not None and due.scheduled_for > now

    async def _visit_reminders(self, due: DueRun, report: TickReport) -> bool:
        """Send what is due of a scheduled run's reminders; False when another runner has it, or
        it started or ended before we could lease it."""
        until = self.clock.now() + dt.timedelta(seconds=self.settings.run_lease_seconds)
        nudges = await self._lease_visit(due.id, until)
        if nudges is None:
            return False
        lease = Lease(due.id, until, nudges)
        wake: dt.datetime | None = None
        try:
            wake = await self._send_due(lease, report)
        except BaseException:
            # Look again after the backoff rather than leave the run dormant with no wake time.
            wake = self.clock.now() + dt.timedelta(seconds=self.settings.retry_seconds)
            raise
        finally:
            await self._release_visit(lease, wake)
        return True

    @retry_on_conflict
    async def _lease_visit(self, run_id: int, until: dt.datetime) -> int | None:
        async with self.engine.begin() as conn:
            return await reminders_sql.claim_visit(conn, run_id, self.owner, until, self.clock.now())

    @retry_on_conflict
    async def _release_visit(self, lease: Lease, wake: dt.datetime | None) -> None:
        async with self.engine.begin() as conn:
            if wake is None:
                run = await runs_sql.get(conn, lease.run_id)
                following = await reminders_sql.next_pending_due(conn, lease.run_id)
                if run is not None:
                    wake = run.scheduled_for if following is None else min(following, run.scheduled_for)
            # ``release_claim`` keeps a wake a control wrote meanwhile (``nudges``) and clears it
            # on a run a cancel or a miss ended.
            await run_leases.release_claim(
                conn, lease.run_id, self.owner, wake_at=wake, nudges_seen=lease.nudges_seen
            )

    async def _send_due(self, lease: Lease, report: TickReport) -> dt.datetime | None:
        """Every reminder of the leased run that is due now, in order of their moments. ``None``:
        work the wake out from what is left."""
        async with self.engine.connect() as conn:
            run = await runs_sql.get(conn, lease.run_id)
            if run is None or run.status is not RunStatus.SCHEDULED:
                return None
            definition = await self.versions.get(conn, run.version_id)
            pending = await reminders_sql.pending(conn, run.id)
        for step in pending:
            now = self.clock.now()
            if run.scheduled_for <= now or (step.due_at is not None and step.due_at > now):
                # The start is due (and skips the rest), or nothing more is due yet.
                break
            moment = reminders_sql.moment_of(definition, step.seq, run.scheduled_for) or step.due_at or now
            late = max((now - moment).total_seconds(), 0.0)
            if late > definition.grace_seconds:
                await self._skip_late(run, definition, step, late, now)
                continue
            if not await self._send_one(lease, run, definition, step, report, late):
                break
        return None

    @retry_on_conflict
    async def _skip_late(
        self, run: RunRecord, definition: EventDefinition, step: StepRecord, late: float, now: dt.datetime
    ) -> None:
        async with self.engine.begin() as conn:
            note = f"not sent: {late:.0f} s late, past the grace of {definition.grace_seconds} s"
            if await reminders_sql.skip(conn, [step.id], note, now):
                skipped = ReminderSkipped(
                    ReminderSkip.LATE, before=_lead(definition, step.seq), late_seconds=late
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
        self,
        lease: Lease,
        run: RunRecord,
        definition: EventDefinition,
        step: StepRecord,
        report: TickReport,
        late: float,
    ) -> bool:
        """Claim (committed), perform, settle. False when the claim was refused: the run
        started, ended or changed hands, or the reminder was settled by someone else."""
        if not await self._claim_reminder(lease, step):
            return False
        if not await self._still_leased(lease, step):
            return False
        report.steps_dispatched += 1
        envelope = step_envelope(run, step)
        outcome = await perform(self.registry, envelope, step.action_id)
        await self._settle_reminder(run, definition, step, step.attempts + 1, outcome, late)
        return True

    @retry_on_conflict
    async def _claim_reminder(self, lease: Lease, step: StepRecord) -> bool:
        now = self.clock.now()
        step_lease = self._step_lease(step, now)
        with lease_kept_on_rollback(lease):
            async with self.engine.begin() as conn:
                await self._renew_for_claim(conn, lease, step_lease, now)
                claimed = await reminders_sql.claim(
                    conn, step.id, run_id=lease.run_id, owner=self.owner, lease_until=step_lease, now=now
                )
                if claimed:
                    lease.claimed[step.id] = step_lease
                return claimed

    @retry_on_conflict
    async def _settle_reminder(
        self,
        run: RunRecord,
        definition: EventDefinition,
        step: StepRecord,
        attempts: int,
        outcome: Classified,
        late: float,
    ) -> None:
        now = self.clock.now()
        before = _lead(definition, step.seq)
        ids = {"run_id": run.id, "step_id": step.id}
        async with self.engine.begin() as conn:
            if outcome.outcome in ("done", "parked"):
                if await reminders_sql.finish(
                    conn, step.id, self.owner, StepStatus.DONE, now, result=outcome.output
                ):
                    sent = ReminderSent(
                        before=before or 0.0,
                        starts_at=run.scheduled_for,
                        attempts=attempts,
                        late_seconds=round(late, 3) if late >= 1 else None,
                    )
                    await record(conn, run.id, sent, now, step_id=step.id)
                return
            error = outcome.error or "failed"
            if outcome.outcome == "retry" and attempts < self.settings.max_attempts:
                due = now + dt.timedelta(seconds=self.settings.retry_seconds)
                if await reminders_sql.reschedule(conn, step.id, self.owner, due, error, now):
                    await record(conn, run.id, StepRetry(attempts, error, due), now, step_id=step.id)
                return
            if outcome.outcome == "retry":
                error = f"gave up after {attempts} attempts: {error}"
            if await reminders_sql.finish(
                conn, step.id, self.owner, StepStatus.FAILED, now, error=error, result=outcome.output
            ):
                await record(
                    conn, run.id, ReminderFailed(error[:300], attempts, before), now, step_id=step.id
                )
        # Only a failure for good gets here (every other outcome returned in the transaction).
        log.warning("run %s: reminder %s failed: %s", run.id, step.seq, error, extra=ids)
