"""Phase boundaries: entering the first phase, closing one phase and entering the next (or
ending the run), and completing a run that is ``ending``.

Closing a phase is written so it can share a transaction with the settle of the phase's last
step (``steps``): the guards come first and a refused one drops the lines queued for it, so
the settle it rides with still commits.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.ext.asyncio import AsyncConnection

from runner import catalog
from runner.db import retry_on_conflict
from runner.definitions import EventDefinition
from runner.engine.context import EngineContext
from runner.engine.core import Go, Stop, Verdict, recover
from runner.history import LineBatch, PhaseCompleted, PhaseStarted, record, written_together
from runner.lifecycle import enter_phase, move_run
from runner.records import RunRecord
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import Health, RunStatus


@retry_on_conflict
async def enter_first_phase(
    ctx: EngineContext, run: RunRecord, definition: EventDefinition, now: dt.datetime
) -> bool:
    # Phase one's steps were created with the run (``catalog.create_run``). Re-inserting them
    # here took a shared lock on the run row (the foreign-key check) before the transition
    # wanted an exclusive one: a deadlock with another runner's claim of the same run.
    first = definition.phases[0]
    async with ctx.engine.begin() as conn, written_together(conn):
        if not await move_run(conn, run.id, RunStatus.STARTING, RunStatus.RUNNING, now, phase=first.key):
            return False
        if run.health is Health.STALLED:
            await recover(conn, run.id, now)
        await record(conn, run.id, PhaseStarted(first.key), now)
    return True


async def end_phase(
    ctx: EngineContext, run: RunRecord, definition: EventDefinition, phase: str, now: dt.datetime
) -> Verdict:
    """The phase has no open steps left (read so): close it in a transaction of its own."""
    if definition.next_phase(phase) is None and run.held_until is not None and run.held_until > now:
        # A wait at the very end holds the end of the event too.
        return Stop(run.held_until)
    return await _close_phase_alone(ctx, run, definition, phase, now)


@retry_on_conflict
async def _close_phase_alone(
    ctx: EngineContext, run: RunRecord, definition: EventDefinition, phase: str, now: dt.datetime
) -> Verdict:
    async with ctx.engine.begin() as conn, written_together(conn) as batch:
        if run.health is Health.STALLED:
            await recover(conn, run.id, now)
        verdict = await close_phase(conn, batch, run, definition, phase, now)
    return Stop() if verdict is Go.REREAD else verdict


async def close_phase(
    conn: AsyncConnection,
    batch: LineBatch,
    run: RunRecord,
    definition: EventDefinition,
    phase: str,
    now: dt.datetime,
) -> Verdict:
    """Close ``phase`` and enter the next one (``Go.CROSSED``) or end the run
    (``Go.ENDED``: ``running -> ending -> completed``), in the caller's transaction.
    ``Go.REREAD`` when the run stopped being ``running`` underneath us: nothing of the
    boundary is written then. ``Stop`` when a wait at the very end holds the run."""
    following = definition.next_phase(phase)
    if following is None and run.held_until is not None and run.held_until > now:
        return Stop(run.held_until)
    mark = batch.mark()
    await record(conn, run.id, PhaseCompleted(phase), now)
    if following is None:
        if await move_run(
            conn,
            run.id,
            RunStatus.RUNNING,
            RunStatus.COMPLETED,
            now,
            via=(RunStatus.ENDING,),
            frees_a_key=run.concurrency_key is not None,
        ):
            return Go.ENDED
        batch.drop_since(mark)
        return Go.REREAD
    # The run row is locked first, before the step inserts' foreign-key checks take a
    # shared lock on it: the other order deadlocks with a competing runner.
    if not await enter_phase(conn, run.id, following.key, now):
        batch.drop_since(mark)
        return Go.REREAD
    await steps_sql.materialise_phase(
        conn,
        run.id,
        following.key,
        catalog.phase_step_specs(following),
        now,
        first_due_at=run.held_until,
    )
    if run.held_until is not None:
        await runs_sql.take_phase_hold(conn, run.id)
    return Go.CROSSED


@retry_on_conflict
async def complete(ctx: EngineContext, run: RunRecord, now: dt.datetime) -> None:
    """A run found ``ending`` (its runner died between the two moves, before they shared a
    transaction): complete it."""
    async with ctx.engine.begin() as conn:
        if run.health is Health.STALLED:
            await recover(conn, run.id, now)
        await move_run(
            conn,
            run.id,
            RunStatus.ENDING,
            RunStatus.COMPLETED,
            now,
            frees_a_key=run.concurrency_key is not None,
        )
