"""Tick stage 3: advance each due run, concurrently (one slow action must not hold up the
others): take it by compare-and-set, walk its current phase step by step (each step claim
re-checks that the run is still ``running``, so a pause pressed mid-batch stops the batch),
cross phase boundaries, complete it, and give the lease back with the time it next needs a
tick."""

from __future__ import annotations

import asyncio
import datetime as dt

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from runner import catalog
from runner.db import DATABASE_ERRORS, retry_on_conflict
from runner.definitions import EventDefinition, PhaseDefinition
from runner.engine.core import Abandon, Go, Lease, RunKey, RunnerBase, Stop, TickReport, Verdict, log
from runner.engine.steps import Stepping
from runner.history import PhaseCompleted, PhaseStarted, RunBlocked, record
from runner.lifecycle import Claim, enter_phase, move_run
from runner.records import DueRun, RunRecord
from runner.sql import run_concurrency as concurrency_sql
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import Health, RunStatus, StepStatus


class Advancing(Stepping, RunnerBase):
    async def _advance_due(self, report: TickReport) -> None:
        now = self.clock.now()
        async with self.engine.connect() as conn:
            due = await runs_sql.find_due(conn, now, self.settings.due_batch)
        if not due:
            return
        gate = asyncio.Semaphore(self.settings.concurrent_runs)

        async def one(run: DueRun) -> None:
            key = RunKey(run.id)
            async with gate:
                try:
                    if await self._advance(run, report):
                        report.runs_advanced += 1
                    self._last_error.pop(key, None)
                except DATABASE_ERRORS as exc:
                    # A database blip mid-run: the lease expires and the next tick carries on.
                    report.errors.append(f"run {run.id}: {exc}")
                    if self._first_time(key, exc):
                        log.warning(
                            "run %s: database error while advancing: %s",
                            run.id,
                            exc,
                            extra={"run_id": run.id},
                        )
                except Exception as exc:
                    report.errors.append(f"run {run.id}: {exc!r}")
                    if self._first_time(key, exc):
                        log.exception(
                            "run %s: unexpected error while advancing", run.id, extra={"run_id": run.id}
                        )

        await asyncio.gather(*(one(run) for run in due))

    async def _advance(self, run: DueRun, report: TickReport) -> bool:
        lease = await self._take(run)
        if lease is None:
            return False
        wake: dt.datetime | None = None
        try:
            wake = await self._drive(lease, report)
        except BaseException:
            # Look again after the backoff rather than leave the run dormant with no wake time.
            wake = self.clock.now() + dt.timedelta(seconds=self.settings.retry_seconds)
            raise
        finally:
            await self._release(lease, wake)
        return True

    @retry_on_conflict
    async def _release(self, lease: Lease, wake: dt.datetime | None) -> None:
        async with self.engine.begin() as conn:
            await runs_sql.release_claim(
                conn, lease.run_id, self.owner, wake_at=wake, nudges_seen=lease.nudges_seen
            )

    @retry_on_conflict
    async def _take(self, due: DueRun) -> Lease | None:
        """Take the run's lease: ``scheduled -> starting`` (with the concurrency key) or a free
        lease on a run in flight. ``None`` when someone else has it or the key is held."""
        run_id = due.id
        now = self.clock.now()
        until = now + dt.timedelta(seconds=self.settings.run_lease_seconds)
        async with self.engine.begin() as conn:
            if due.status is RunStatus.SCHEDULED:
                if not await self._start(conn, due, Claim(self.owner, until), now):
                    return None
            elif not await runs_sql.claim_tick(conn, run_id, self.owner, until, now):
                return None
            run = await runs_sql.get(conn, run_id)
        assert run is not None
        return Lease(run_id, until, run.nudges)

    async def _start(self, conn: AsyncConnection, due: DueRun, claim: Claim, now: dt.datetime) -> bool:
        holder = await concurrency_sql.concurrency_holder(conn, due.concurrency_key, due.id)
        if holder is not None:
            await self._blocked(conn, due, int(holder["id"]), now)
            return False
        # No savepoint: a refused statement does not abort the transaction on either backend,
        # and a deadlock (which does) would take the savepoint with it.
        try:
            return await move_run(conn, due.id, RunStatus.SCHEDULED, RunStatus.STARTING, now, claim=claim)
        except sa_exc.IntegrityError:
            # Another runner started a holder of the same key between our check and our claim;
            # the slot's unique index refused us.
            holder = await concurrency_sql.concurrency_holder(conn, due.concurrency_key, due.id)
            if holder is not None:
                await self._blocked(conn, due, int(holder["id"]), now)
            return False

    async def _blocked(self, conn: AsyncConnection, due: DueRun, holder_id: int, now: dt.datetime) -> None:
        key = due.concurrency_key or ""
        error = f"waiting: concurrency key {key!r} is held by run {holder_id}"
        recheck = now + dt.timedelta(seconds=self.settings.blocked_recheck_seconds)
        if await concurrency_sql.mark_blocked(conn, due.id, holder_id, error, now, recheck):
            await record(conn, due.id, RunBlocked(key, holder_id), now)

    async def _drive(self, lease: Lease, report: TickReport) -> dt.datetime | None:
        """Move one leased run as far as it goes; answer when it next needs a tick."""
        run_id = lease.run_id
        dispatched = 0
        while True:
            now = self.clock.now()
            async with self.engine.connect() as conn:
                run = await runs_sql.get(conn, run_id)
                if run is None:
                    return None
                definition = await self.versions.get(conn, run.version_id)
            if run.status is RunStatus.STARTING:
                if not await self._enter_first_phase(run, definition, now):
                    return None
                continue
            if run.status is RunStatus.ENDING:
                await self._complete(run_id, now, recover=run.health is Health.STALLED)
                return None
            if run.status is not RunStatus.RUNNING:
                return None
            phase = run.current_phase or definition.phases[0].key
            async with self.engine.connect() as conn:
                open_steps = await steps_sql.open_steps(conn, run_id, phase)
            verdict: Verdict
            if not open_steps:
                verdict = await self._end_phase(run, definition, phase, now)
            else:
                verdict = Go.NEXT
                for step in open_steps:
                    now = self.clock.now()
                    if step.status is StepStatus.RUNNING:
                        # Parked (NULL lease): only a human moves it. Leased: its runner is
                        # dispatching it, or died and the reclaim will hand it back.
                        verdict = Stop(step.claim_expires_at)
                    elif step.due_at is not None and step.due_at > now:
                        verdict = Stop(step.due_at)
                    elif dispatched >= self.settings.steps_per_tick:
                        verdict = Stop(now)
                    else:
                        verdict = await self._run_step(lease, run, step, report)
                        dispatched += 1
                    if verdict is not Go.NEXT:
                        break
            if isinstance(verdict, Stop):
                return verdict.wake
            # Go.REREAD, or Go.NEXT after the last open step: read the run again.

    @retry_on_conflict
    async def _enter_first_phase(self, run: RunRecord, definition: EventDefinition, now: dt.datetime) -> bool:
        # Phase one's steps were created with the run (``catalog.create_run``). Re-inserting them
        # here took a shared lock on the run row (the foreign-key check) before the transition
        # wanted an exclusive one: a deadlock with another runner's claim of the same run.
        first = definition.phases[0]
        async with self.engine.begin() as conn:
            if not await move_run(conn, run.id, RunStatus.STARTING, RunStatus.RUNNING, now, phase=first.key):
                return False
            if run.health is Health.STALLED:
                await self._recover(conn, run.id, now)
            await record(conn, run.id, PhaseStarted(first.key), now)
        return True

    async def _end_phase(
        self, run: RunRecord, definition: EventDefinition, phase: str, now: dt.datetime
    ) -> Verdict:
        following = definition.next_phase(phase)
        if following is None and run.held_until is not None and run.held_until > now:
            # A wait at the very end holds the end of the event too.
            return Stop(run.held_until)
        try:
            await self._cross_phase_boundary(run, phase, following, now)
        except Abandon:
            return Stop()
        if following is None:
            await self._complete(run.id, now)
            return Stop()
        return Go.REREAD

    @retry_on_conflict
    async def _cross_phase_boundary(
        self, run: RunRecord, phase: str, following: PhaseDefinition | None, now: dt.datetime
    ) -> None:
        """Close ``phase`` and enter ``following`` (or ``ending``), in one transaction; raises
        ``Abandon`` (rolling it back) when the run stopped being ``running`` underneath us."""
        async with self.engine.begin() as conn:
            if run.health is Health.STALLED:
                await self._recover(conn, run.id, now)
            await record(conn, run.id, PhaseCompleted(phase), now)
            if following is None:
                if not await move_run(conn, run.id, RunStatus.RUNNING, RunStatus.ENDING, now):
                    raise Abandon
                return
            # The run row is locked first, before the step inserts' foreign-key checks take a
            # shared lock on it: the other order deadlocks with a competing runner.
            if not await enter_phase(conn, run.id, following.key, now):
                raise Abandon
            await steps_sql.materialise_phase(
                conn,
                run.id,
                following.key,
                catalog.phase_step_specs(following),
                now,
                first_due_at=run.held_until,
            )
            await runs_sql.take_phase_hold(conn, run.id)

    @retry_on_conflict
    async def _complete(self, run_id: int, now: dt.datetime, *, recover: bool = False) -> None:
        async with self.engine.begin() as conn:
            if recover:
                await self._recover(conn, run_id, now)
            await move_run(conn, run_id, RunStatus.ENDING, RunStatus.COMPLETED, now)
