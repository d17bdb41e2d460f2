"""Tick stage 3: advance each due run, concurrently (one slow action must not hold up the
others): take it by compare-and-set, walk its current phase step by step (each step claim
re-checks that the run is still ``running``, so a pause pressed mid-batch stops the batch),
cross phase boundaries, complete it, and give the lease back with the time it next needs a
tick."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import DATABASE_ERRORS, retry_on_conflict
from runner.definitions import EventDefinition
from runner.engine import phases, reminders, steps
from runner.engine.context import EngineContext
from runner.engine.core import DriveOutcome, Go, Lease, RunKey, StageResult, Stop, TickReport, Verdict, log
from runner.engine.reminders import skip_at_start
from runner.history import RunBlocked, record
from runner.lifecycle import Claim, move_run
from runner.records import DueRun, RunRecord, StepRecord
from runner.sql import reminders as reminders_sql
from runner.sql import run_concurrency as concurrency_sql
from runner.sql import run_leases
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import Health, RunStatus, StepStatus


class Advance:
    """Tick stage 3: every run due now, concurrently (one slow action must not hold up the
    others), each under the gate the drives in process share."""

    housekeeping = False

    async def run(self, ctx: EngineContext) -> StageResult:
        report = StageResult()
        now = ctx.clock.now()
        async with ctx.engine.connect() as conn:
            due = await run_leases.find_due(conn, now, ctx.settings.due_batch)
        if not due:
            return report

        async def one(run: DueRun) -> None:
            async with ctx.gate:
                if await guarded(ctx, run.id, report, self.advance_one(ctx, run, report)):
                    report.runs_advanced += 1

        await asyncio.gather(*(one(run) for run in due))
        return report

    async def advance_one(self, ctx: EngineContext, run: DueRun, report: TickReport) -> bool:
        """One due run: a visit to send its reminders, or a drive, each under the run's lease.
        False when another runner has it (or the key it waits on is held)."""
        visit = reminders.is_reminder_visit(run, ctx.clock.now())
        taken = await _take(ctx, run, visit=visit)
        if taken is None:
            return False
        lease, record = taken
        if visit:
            await drive_and_release(ctx, lease, reminders.visit(ctx, lease, record, report))
        else:
            await drive_and_release(ctx, lease, drive(ctx, lease, report, run=record))
        return True


async def guarded(ctx: EngineContext, run_id: int, report: TickReport, advancing: Awaitable[bool]) -> bool:
    """Advance one run; its failure is logged (once while it repeats) and reported, never
    raised: one run's trouble must not stop the others."""
    key = RunKey(run_id)
    try:
        advanced = await advancing
        ctx.errors.clear(key)
        return advanced
    except DATABASE_ERRORS as exc:
        # A database blip mid-run: the lease expires and the next tick carries on.
        report.errors.append(f"run {run_id}: {exc}")
        if ctx.errors.first_time(key, exc):
            log.warning("run %s: database error while advancing: %s", run_id, exc, extra={"run_id": run_id})
    except Exception as exc:
        report.errors.append(f"run {run_id}: {exc!r}")
        if ctx.errors.first_time(key, exc):
            log.exception("run %s: unexpected error while advancing", run_id, extra={"run_id": run_id})
    return False


async def drive_and_release(
    ctx: EngineContext, lease: Lease, driving: Coroutine[Any, Any, DriveOutcome]
) -> None:
    """Await the drive (or reminder visit) of a leased run, then do what it decided: hold the
    lease for a wait due soon, or give it back with the run's wake (unless the run ended, which
    let it go already)."""
    outcome = DriveOutcome()
    held = False
    try:
        outcome = await driving
        held = not outcome.ended and await ctx.hold.hold(ctx, lease, outcome)
    except asyncio.CancelledError:
        # Shutting down: whoever runs next takes the run over at once.
        outcome = DriveOutcome(ctx.clock.now())
        raise
    except BaseException:
        # Look again after the backoff rather than leave the run dormant with no wake time.
        outcome = DriveOutcome(ctx.clock.now() + dt.timedelta(seconds=ctx.settings.retry_seconds))
        raise
    finally:
        if not outcome.ended and not held:
            await release(ctx, lease, outcome.wake)
        if not held:
            ctx.hold.drive_ended(lease.run_id, ended=outcome.ended)


@retry_on_conflict
async def release(ctx: EngineContext, lease: Lease, wake: dt.datetime | None) -> None:
    async with ctx.engine.begin() as conn:
        await run_leases.release_claim(
            conn, lease.run_id, ctx.owner, wake_at=wake, nudges_seen=lease.nudges_seen
        )


@retry_on_conflict
async def _take(ctx: EngineContext, due: DueRun, *, visit: bool) -> tuple[Lease, RunRecord] | None:
    """Take the run's lease: on a run still ``scheduled`` for a reminder visit, ``scheduled ->
    starting`` (with the concurrency key), or a free lease on a run in flight. ``None`` when
    someone else has it, the key is held, or a visited run started or ended meanwhile."""
    run_id = due.id
    now = ctx.clock.now()
    until = now + dt.timedelta(seconds=ctx.settings.run_lease_seconds)
    async with ctx.engine.begin() as conn:
        if visit:
            if not await reminders_sql.claim_visit(conn, run_id, ctx.owner, until, now):
                return None
        elif due.status is RunStatus.SCHEDULED:
            if not await _start(ctx, conn, due, Claim(ctx.owner, until), now):
                return None
        elif not await run_leases.claim_tick(conn, run_id, ctx.owner, until, now):
            return None
        run = await runs_sql.get(conn, run_id)
    assert run is not None
    return Lease(run_id, until, run.nudges), run


async def _start(
    ctx: EngineContext, conn: AsyncConnection, due: DueRun, claim: Claim, now: dt.datetime
) -> bool:
    holder = await concurrency_sql.concurrency_holder(conn, due.concurrency_key, due.id)
    if holder is not None:
        await _blocked(ctx, conn, due, int(holder["id"]), now)
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
            await _blocked(ctx, conn, due, int(holder["id"]), now)
        return False
    if started:
        await skip_at_start(conn, due.id, now)
    return started


async def _blocked(
    ctx: EngineContext, conn: AsyncConnection, due: DueRun, holder_id: int, now: dt.datetime
) -> None:
    key = due.concurrency_key or ""
    error = f"waiting: concurrency key {key!r} is held by run {holder_id}"
    recheck = now + dt.timedelta(seconds=ctx.settings.blocked_recheck_seconds)
    if await concurrency_sql.mark_blocked(conn, due.id, holder_id, error, now, recheck):
        await record(conn, due.id, RunBlocked(key, holder_id), now)


async def drive(
    ctx: EngineContext,
    lease: Lease,
    report: TickReport,
    *,
    run: RunRecord | None = None,
    open_steps: list[StepRecord] | None = None,
    claimed: bool = False,
) -> DriveOutcome:
    """Move one leased run as far as it goes; answer when it next needs a tick, and whether it
    ended.

    ``run`` and ``open_steps`` are what the caller already knows (read under this lease, or
    written by it); they are read again only when a guard was refused or a hold moved a due
    date. ``claimed``: the first open step is already claimed by this lease."""
    run_id = lease.run_id
    walk = _Walk(claimed=claimed)
    definition: EventDefinition | None = None
    while True:
        now = ctx.clock.now()
        if run is None or definition is None:
            async with ctx.engine.connect() as conn:
                if run is None:
                    run = await runs_sql.get(conn, run_id)
                    if run is None:
                        return DriveOutcome()
                definition = await ctx.versions.get(conn, run.version_id)
        if run.status is RunStatus.STARTING:
            if not await phases.enter_first_phase(ctx, run, definition, now):
                return DriveOutcome()
            run = dataclasses.replace(
                run, status=RunStatus.RUNNING, current_phase=definition.phases[0].key, health=Health.OK
            )
            continue
        if run.status is RunStatus.ENDING:
            await phases.complete(ctx, run, now)
            return DriveOutcome(ended=True)
        if run.status is not RunStatus.RUNNING:
            return DriveOutcome()
        phase = run.current_phase or definition.phases[0].key
        if open_steps is None:
            async with ctx.engine.connect() as conn:
                open_steps = await steps_sql.open_steps(conn, run_id, phase)
        if not open_steps:
            verdict = await phases.end_phase(ctx, run, definition, phase, now)
        else:
            verdict = await walk.steps(ctx, lease, run, definition, open_steps, report)
        if isinstance(verdict, Stop):
            return DriveOutcome(verdict.wake, known=walk.known)
        if verdict is Go.ENDED:
            return DriveOutcome(ended=True)
        if verdict is Go.CROSSED:
            following_phase = definition.next_phase(phase)
            assert following_phase is not None
            run = dataclasses.replace(
                run, current_phase=following_phase.key, held_until=None, health=Health.OK
            )
            open_steps = None
            continue
        # Go.REREAD, or Go.NEXT after the last open step: read the run again.
        run, open_steps, walk.claimed = None, None, False


@dataclass
class _Walk:
    """One drive's walk through the open steps of the phase it is in, across as many phases as
    it crosses: how many steps it dispatched (bounded per tick), whether the next one is already
    claimed, and what it knew when it stopped at a step not yet due."""

    claimed: bool = False
    dispatched: int = 0
    known: tuple[RunRecord, list[StepRecord]] | None = None

    async def steps(
        self,
        ctx: EngineContext,
        lease: Lease,
        run: RunRecord,
        definition: EventDefinition,
        open_steps: list[StepRecord],
        report: TickReport,
    ) -> Verdict:
        self.known = None
        verdict: Verdict = Go.NEXT
        for index, step in enumerate(open_steps):
            now = ctx.clock.now()
            if self.claimed:
                pass
            elif step.status is StepStatus.RUNNING:
                # Parked (NULL lease): only a human moves it. Leased: its runner is dispatching
                # it, or died and the reclaim will hand it back.
                return Stop(step.claim_expires_at)
            elif step.due_at is not None and step.due_at > now:
                self.known = (run, open_steps)
                return Stop(step.due_at)
            elif self.dispatched >= ctx.settings.steps_per_tick:
                return Stop(now)
            following = open_steps[index + 1] if index + 1 < len(open_steps) else None
            verdict = await steps.run_step(
                ctx,
                lease,
                run,
                definition,
                step,
                report,
                claimed=self.claimed,
                following=following,
                may_claim_next=self.dispatched + 1 < ctx.settings.steps_per_tick,
            )
            self.dispatched += 1
            self.claimed = verdict is Go.NEXT_CLAIMED
            if verdict is not Go.NEXT and not self.claimed:
                return verdict
        return verdict
