"""Tick stage 3: advance each due run, concurrently (one slow action must not hold up the
others): take it by compare-and-set, walk its current phase step by step (each step claim
re-checks that the run is still ``running``, so a pause pressed mid-batch stops the batch),
cross phase boundaries, complete it, and give the lease back with the time it next needs a
tick."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Awaitable

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import DATABASE_ERRORS, retry_on_conflict
from runner.definitions import EventDefinition
from runner.engine.core import Go, Lease, RunKey, RunnerBase, Stop, TickReport, Verdict, log
from runner.engine.reminders import Reminding, skip_at_start
from runner.engine.steps import Stepping
from runner.history import RunBlocked, record
from runner.lifecycle import Claim, move_run
from runner.records import DueRun, RunRecord, StepRecord
from runner.sql import run_concurrency as concurrency_sql
from runner.sql import run_leases
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import Health, RunStatus, StepStatus


class Advancing(Reminding, Stepping, RunnerBase):
    async def _advance_due(self, report: TickReport) -> None:
        now = self.clock.now()
        async with self.engine.connect() as conn:
            due = await run_leases.find_due(conn, now, self.settings.due_batch)
        if not due:
            return

        async def one(run: DueRun) -> None:
            async with self._gate:
                if await self._guarded(run.id, report, self._advance(run, report)):
                    report.runs_advanced += 1

        await asyncio.gather(*(one(run) for run in due))

    async def _guarded(self, run_id: int, report: TickReport, advancing: Awaitable[bool]) -> bool:
        """Advance one run; its failure is logged (once while it repeats) and reported, never
        raised: one run's trouble must not stop the others."""
        key = RunKey(run_id)
        try:
            advanced = await advancing
            self._last_error.pop(key, None)
            return advanced
        except DATABASE_ERRORS as exc:
            # A database blip mid-run: the lease expires and the next tick carries on.
            report.errors.append(f"run {run_id}: {exc}")
            if self._first_time(key, exc):
                log.warning(
                    "run %s: database error while advancing: %s", run_id, exc, extra={"run_id": run_id}
                )
        except Exception as exc:
            report.errors.append(f"run {run_id}: {exc!r}")
            if self._first_time(key, exc):
                log.exception("run %s: unexpected error while advancing", run_id, extra={"run_id": run_id})
        return False

    async def _advance(self, run: DueRun, report: TickReport) -> bool:
        if self._is_reminder_visit(run, self.clock.now()):
            return await self._visit_reminders(run, report)
        taken = await self._take(run)
        if taken is None:
            return False
        lease, record = taken
        await self._drive_and_release(lease, report, run=record)
        return True

    async def _drive_and_release(
        self,
        lease: Lease,
        report: TickReport,
        *,
        run: RunRecord | None = None,
        open_steps: list[StepRecord] | None = None,
        claimed: bool = False,
    ) -> None:
        wake: dt.datetime | None = None
        held = False
        try:
            wake = await self._drive(lease, report, run=run, open_steps=open_steps, claimed=claimed)
            held = not lease.ended and await self._hold_in_process(lease, wake)
        except asyncio.CancelledError:
            # Shutting down: whoever runs next takes the run over at once.
            wake = self.clock.now()
            raise
        except BaseException:
            # Look again after the backoff rather than leave the run dormant with no wake time.
            wake = self.clock.now() + dt.timedelta(seconds=self.settings.retry_seconds)
            raise
        finally:
            if not lease.ended and not held:
                await self._release(lease, wake)
            if not held:
                self._drive_ended(lease)

    async def _hold_in_process(self, lease: Lease, wake: dt.datetime | None) -> bool:
        """Keep the lease and resume the run here at ``wake`` (``InProcess``); False: give the
        lease back with the wake for a tick to find."""
        return False

    def _drive_ended(self, lease: Lease) -> None:
        """A drive of the run gave its lease back or ended the run (``InProcess`` listens)."""

    @retry_on_conflict
    async def _release(self, lease: Lease, wake: dt.datetime | None) -> None:
        async with self.engine.begin() as conn:
            await run_leases.release_claim(
                conn, lease.run_id, self.owner, wake_at=wake, nudges_seen=lease.nudges_seen
            )

    @retry_on_conflict
    async def _take(self, due: DueRun) -> tuple[Lease, RunRecord] | None:
        """Take the run's lease: ``scheduled -> starting`` (with the concurrency key) or a free
        lease on a run in flight. ``None`` when someone else has it or the key is held."""
        run_id = due.id
        now = self.clock.now()
        until = now + dt.timedelta(seconds=self.settings.run_lease_seconds)
        async with self.engine.begin() as conn:
            if due.status is RunStatus.SCHEDULED:
                if not await self._start(conn, due, Claim(self.owner, until), now):
                    return None
            elif not await run_leases.claim_tick(conn, run_id, self.owner, until, now):
                return None
            run = await runs_sql.get(conn, run_id)
        assert run is not None
        return Lease(run_id, until, run.nudges), run

    async def _start(self, conn: AsyncConnection, due: DueRun, claim: Claim, now: dt.datetime) -> bool:
        holder = await concurrency_sql.concurrency_holder(conn, due.concurrency_key, due.id)
        if holder is not None:
            await self._blocked(conn, due, int(holder["id"]), now)
            return False
        # No savepoint: a refused statement does not abort the transaction on either backend,
        # and a deadlock (which does) would take the savepoint with it.
        try:
            started = await move_run(conn, due.id, RunStatus.SCHEDULED, RunStatus.STARTING, now, claim=claim)
        except sa_exc.IntegrityError:
            # Another runner started a holder of the same key between our check and our claim;
            # the slot's unique index refused us.
            holder = await concurrency_sql.concurrency_holder(conn, due.concurrency_key, due.id)
            if holder is not None:
                await self._blocked(conn, due, int(holder["id"]), now)
            return False
        if started:
            await skip_at_start(conn, due.id, now)
        return started

    async def _blocked(self, conn: AsyncConnection, due: DueRun, holder_id: int, now: dt.datetime) -> None:
        key = due.concurrency_key or ""
        error = f"waiting: concurrency key {key!r} is held by run {holder_id}"
        recheck = now + dt.timedelta(seconds=self.settings.blocked_recheck_seconds)
        if await concurrency_sql.mark_blocked(conn, due.id, holder_id, error, now, recheck):
            await record(conn, due.id, RunBlocked(key, holder_id), now)

    async def _drive(
        self,
        lease: Lease,
        report: TickReport,
        *,
        run: RunRecord | None = None,
        open_steps: list[StepRecord] | None = None,
        claimed: bool = False,
    ) -> dt.datetime | None:
        """Move one leased run as far as it goes; answer when it next needs a tick.

        ``run`` and ``open_steps`` are what the caller already knows (read under this lease, or
        written by it); they are read again only when a guard was refused or a hold moved a due
        date. ``claimed``: the first open step is already claimed by this lease."""
        run_id = lease.run_id
        dispatched = 0
        definition: EventDefinition | None = None
        while True:
            now = self.clock.now()
            lease.known = None
            if run is None or definition is None:
                async with self.engine.connect() as conn:
                    if run is None:
                        run = await runs_sql.get(conn, run_id)
                        if run is None:
                            return None
                    definition = await self.versions.get(conn, run.version_id)
            if run.status is RunStatus.STARTING:
                if not await self._enter_first_phase(run, definition, now):
                    return None
                run = dataclasses.replace(
                    run, status=RunStatus.RUNNING, current_phase=definition.phases[0].key, health=Health.OK
                )
                continue
            if run.status is RunStatus.ENDING:
                await self._complete(run, now)
                lease.ended = True
                return None
            if run.status is not RunStatus.RUNNING:
                return None
            phase = run.current_phase or definition.phases[0].key
            if open_steps is None:
                async with self.engine.connect() as conn:
                    open_steps = await steps_sql.open_steps(conn, run_id, phase)
            verdict: Verdict
            if not open_steps:
                verdict = await self._end_phase(run, definition, phase, now)
            else:
                verdict = Go.NEXT
                for index, step in enumerate(open_steps):
                    now = self.clock.now()
                    if claimed:
                        pass
                    elif step.status is StepStatus.RUNNING:
                        # Parked (NULL lease): only a human moves it. Leased: its runner is
                        # dispatching it, or died and the reclaim will hand it back.
                        verdict = Stop(step.claim_expires_at)
                        break
                    elif step.due_at is not None and step.due_at > now:
                        verdict = Stop(step.due_at)
                        lease.known = (run, open_steps)
                        break
                    elif dispatched >= self.settings.steps_per_tick:
                        verdict = Stop(now)
                        break
                    following = open_steps[index + 1] if index + 1 < len(open_steps) else None
                    verdict = await self._run_step(
                        lease,
                        run,
                        definition,
                        step,
                        report,
                        claimed=claimed,
                        following=following,
                        may_claim_next=dispatched + 1 < self.settings.steps_per_tick,
                    )
                    dispatched += 1
                    claimed = verdict is Go.NEXT_CLAIMED
                    if verdict is not Go.NEXT and not claimed:
                        break
            if isinstance(verdict, Stop):
                return verdict.wake
            if verdict is Go.ENDED:
                lease.ended = True
                return None
            if verdict is Go.CROSSED:
                following_phase = definition.next_phase(phase)
                assert following_phase is not None
                run = dataclasses.replace(
                    run, current_phase=following_phase.key, held_until=None, health=Health.OK
                )
                open_steps = None
                continue
            # Go.REREAD, or Go.NEXT after the last open step: read the run again.
            run, open_steps, claimed = None, None, False
