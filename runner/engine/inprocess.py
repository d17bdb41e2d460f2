"""Runs driven in this process outside the tick: a start handed over by the controls
(``Controls(driver=runner)``), driven the moment its creating transaction commits; and a run
whose next step falls due within ``hold_in_process_seconds``, which keeps its lease and is
resumed here at that very instant (a step falling due while a tick runs does not wait for the
next tick, and no tick has to find it first).

A held run stays leased, so no runner takes it meanwhile; a tick starting wakes the held runs
early (``bus.TickStarted``: a control may have skipped the step they wait for, or paused the
run), and they look again. This is the runner's hold policy (``context.HoldPolicy``): the drive
asks it what to do with a wait, and it tells the bus when a drive outside the tick let its run
go (``bus.DriveFinished``).

A handed-over run is created leased to this runner, so no other runner touches it while it is
driven here; if this process dies, the lease runs out and any runner's tick takes the run over
where its last committed step left it, as after any other crash.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from runner import catalog
from runner.bus import Closing, DriveFinished, Event, LocalEventBus, TickStarted
from runner.db import retry_on_conflict
from runner.engine import advance
from runner.engine.context import EngineContext
from runner.engine.core import DriveOutcome, Lease, TickReport, log
from runner.lifecycle import Handover
from runner.records import RunRecord, StepRecord
from runner.sql import run_leases
from runner.sql import runs as runs_sql
from runner.states import RUN_TERMINAL, RunStatus


@dataclass
class DriveWatch:
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the drive completed the run under its lease (so no read is needed to say so).
    ended: RunStatus | None = None


class InProcess:
    def __init__(self, bus: LocalEventBus) -> None:
        self._bus = bus
        self._detached: set[asyncio.Task[None]] = set()
        # Runs being driven here right now, for whoever waits to hear how each drive ends.
        self._drives: dict[int, DriveWatch] = {}
        self._closing = False
        # Set (and replaced) on every wake: what a held run's sleep also waits on.
        self._wake_held = asyncio.Event()
        bus.subscribe(self._woken, {TickStarted, Closing})

    def _woken(self, event: Event) -> None:
        if isinstance(event, Closing):
            self._closing = True
        self.wake_held()

    def handover(self, ctx: EngineContext, first_action_id: str, now: dt.datetime) -> Handover | None:
        if self._closing:
            return None
        action = ctx.registry.get(first_action_id)
        budget = dt.timedelta(milliseconds=action.budget_ms if action else 1000)
        margin = dt.timedelta(seconds=ctx.settings.step_lease_margin_seconds)
        step_lease = now + budget + margin
        run_lease = step_lease + ctx.settings.after_step
        return Handover(ctx.owner, run_lease, step_lease, action.version if action else None)

    def drive_started(self, ctx: EngineContext, started: catalog.StartedHere) -> None:
        run = started.run
        assert run.claim_expires_at is not None
        lease = Lease(run.id, run.claim_expires_at, run.nudges)
        # ``handover`` leased the run for the step's lease and ``after_step``: the step's is that.
        step_lease = run.claim_expires_at - ctx.settings.after_step
        lease.claimed[started.steps[0].id] = step_lease
        self._spawn(run.id, self._drive_here(ctx, lease, started))

    async def _drive_here(self, ctx: EngineContext, lease: Lease, started: catalog.StartedHere) -> None:
        async def drive() -> bool:
            driving = advance.drive(
                ctx, lease, TickReport(), run=started.run, open_steps=started.steps, claimed=True
            )
            await advance.drive_and_release(ctx, lease, driving)
            return True

        async with ctx.gate:
            await advance.guarded(ctx, lease.run_id, TickReport(), drive())
        self._bus.publish(DriveFinished(lease.run_id))

    def _spawn(self, run_id: int, driving: Coroutine[Any, Any, None]) -> None:
        self._drives.setdefault(run_id, DriveWatch())
        task = asyncio.get_running_loop().create_task(driving, name=f"eventbot run {run_id}")
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)

    async def hold(self, ctx: EngineContext, lease: Lease, outcome: DriveOutcome) -> bool:
        seconds = ctx.settings.hold_in_process_seconds
        wake, known = outcome.wake, outcome.known
        if seconds <= 0 or self._closing or wake is None or known is None:
            return False
        now = ctx.clock.now()
        if not now < wake <= now + dt.timedelta(seconds=seconds):
            return False
        covered = wake + dt.timedelta(seconds=ctx.settings.step_lease_margin_seconds)
        until = wake + dt.timedelta(seconds=ctx.settings.run_lease_seconds)
        # The lease is set to the wake + a run lease, shortened as well as lengthened: the last
        # claim left it at its step's lease + ``after_step`` (14 s serving), and a holder that
        # died during a short wait kept the run that long, past the step's due time (issue 26
        # item 6). One UPDATE by primary key per wait held.
        if lease.until < covered or lease.until > until:
            if not await _hold_lease(ctx, lease.run_id, until):
                return False
            lease.until = until
        self._spawn(lease.run_id, self._resume_at(ctx, lease, wake, known))
        return True

    async def _resume_at(
        self, ctx: EngineContext, lease: Lease, wake: dt.datetime, known: tuple[RunRecord, list[StepRecord]]
    ) -> None:
        try:
            woken_early = await self._sleep_until(ctx, wake)
        except asyncio.CancelledError:
            # Shutting down mid-wait: give the run back with its wake, for whoever runs next.
            await asyncio.shield(advance.release(ctx, lease, wake))
            self.drive_ended(lease.run_id, ended=False)
            raise
        if self._closing:
            # Closing: a held run is given back with its wake at once, not slept through.
            await advance.release(ctx, lease, wake)
            self.drive_ended(lease.run_id, ended=False)
            return
        run, open_steps = (None, None) if woken_early else known

        async def drive() -> bool:
            driving = advance.drive(ctx, lease, TickReport(), run=run, open_steps=open_steps)
            await advance.drive_and_release(ctx, lease, driving)
            return True

        async with ctx.gate:
            await advance.guarded(ctx, lease.run_id, TickReport(), drive())
        self._bus.publish(DriveFinished(lease.run_id))

    async def _sleep_until(self, ctx: EngineContext, wake: dt.datetime) -> bool:
        """Sleep until ``wake`` by the runner's clock; True if a tick woke the held runs first."""
        woken = self._wake_held
        while (left := (wake - ctx.clock.now()).total_seconds()) > 0:
            if woken.is_set():
                return True
            try:
                await asyncio.wait_for(woken.wait(), timeout=left)
                return True
            except TimeoutError:
                pass
        return False

    def wake_held(self) -> None:
        """Every run held in process looks again now (a control may have changed what they
        wait for)."""
        self._wake_held.set()
        self._wake_held = asyncio.Event()

    def drive_ended(self, run_id: int, *, ended: bool) -> None:
        watch = self._drives.pop(run_id, None)
        if watch is not None:
            watch.ended = RunStatus.COMPLETED if ended else None
            watch.done.set()

    async def until_ended(self, ctx: EngineContext, run_id: int, *, poll_seconds: float = 1.0) -> RunStatus:
        """Wait until the run has ended, and answer how. A drive in this process wakes the
        waiter the moment it lets the run go; an end anywhere else is seen within
        ``poll_seconds``."""
        while True:
            watch = self._drives.get(run_id)
            if watch is not None:
                await watch.done.wait()
                if watch.ended is not None:
                    return watch.ended
            async with ctx.engine.connect() as conn:
                run = await runs_sql.get(conn, run_id)
            if run is None:
                raise LookupError(f"no run {run_id}")
            if run.status in RUN_TERMINAL:
                return run.status
            if run_id not in self._drives:
                await asyncio.sleep(poll_seconds)

    async def aclose(self, *, grace_seconds: float = 5.0) -> None:
        """Stop taking runs over and let the drives in flight here finish (for up to
        ``grace_seconds``); any still going are cancelled, and give their runs back due now.
        Runs held for a wait are given back at once, with the wake they were waiting for."""
        self._bus.publish(Closing())
        pending = set(self._detached)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace_seconds)
        for task in late:
            task.cancel()
        if late:
            log.warning("stopped %d run drive(s) still in flight at shutdown", len(late))
            await asyncio.gather(*late, return_exceptions=True)


@retry_on_conflict
async def _hold_lease(ctx: EngineContext, run_id: int, until: dt.datetime) -> bool:
    async with ctx.engine.begin() as conn:
        return await run_leases.hold_claim(conn, run_id, ctx.owner, until)
