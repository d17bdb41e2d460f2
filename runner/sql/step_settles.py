"""A person's statements on ``event_run_steps``: confirm a parked cue, skip a step, requeue a
failed one, and cancel a run's open steps. None of them ever touches a leased step: it is
somebody's dispatch in progress.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.kinds import Actor
from runner.schema import steps
from runner.sql import step_guards as guards
from runner.states import StepStatus


async def confirm_parked(
    conn: AsyncConnection, step_id: int, now: dt.datetime, *, actor: Actor | None, note: str | None
) -> bool:
    """A human confirms a parked cue. A leased step is somebody's dispatch in progress and is
    refused; a second confirm matches nothing and is told 0."""
    return await _settle_by_human(conn, step_id, guards.parked, StepStatus.DONE, now, actor, note)


async def skip_by_human(
    conn: AsyncConnection,
    step_id: int,
    now: dt.datetime,
    *,
    actor: Actor | None,
    note: str | None,
    parked_only: bool = False,
) -> bool:
    """A pending step or a parked cue; never a leased one, never a failed one (resume carries a
    phase past a failed step). ``parked_only``: a cue's own Skip button, which may only answer
    the cue it was posted with, never skip a step that has not been reached."""
    guard = guards.parked if parked_only else sa.or_(steps.c.status == StepStatus.PENDING, guards.parked)
    return await _settle_by_human(conn, step_id, guard, StepStatus.SKIPPED, now, actor, note)


async def skip_unmet(conn: AsyncConnection, step_id: int, owner: str, now: dt.datetime, note: str) -> bool:
    """A step whose condition is not met (``runner.definitions.conditions``) is skipped, never
    run: pending, or claimed by ``owner`` (the settle before it claimed it) and not yet sent."""
    mine = sa.and_(steps.c.status == StepStatus.RUNNING, steps.c.claimed_by == owner)
    guard = sa.or_(steps.c.status == StepStatus.PENDING, mine)
    return await _settle_by_human(conn, step_id, guard, StepStatus.SKIPPED, now, None, note)


async def _settle_by_human(
    conn: AsyncConnection,
    step_id: int,
    guard: sa.ColumnElement[bool],
    status: StepStatus,
    now: dt.datetime,
    actor: Actor | None,
    note: str | None,
) -> bool:
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.id == step_id, guard, guards.run_not_ended)
        .values(
            status=status,
            finished_at=now,
            claimed_by=None,
            settled_by_id=actor.id if actor else None,
            settled_by_name=actor.name[:100] if actor else None,
            note=note[:500] if note else None,
            updated_at=now,
        )
    )
    return outcome.rowcount == 1


async def approve_parked(
    conn: AsyncConnection, step_id: int, now: dt.datetime, *, actor: Actor | None, result: Any
) -> bool:
    """A step parked on its approval request back to pending, due now, approved by ``actor``, with
    a fresh attempt budget (the request's claim spent one). A second approve matches nothing:
    the step is no longer parked, or (parked again by its own action) approved already."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.id == step_id, guards.parked, steps.c.approved_at.is_(None), guards.run_not_ended)
        .values(
            status=StepStatus.PENDING,
            attempts=0,
            due_at=now,
            approved_by_id=actor.id if actor else None,
            approved_by_name=actor.name[:100] if actor else "staff",
            approved_at=now,
            result=result,
            **guards.released(now),
        )
    )
    return outcome.rowcount == 1


async def requeue(conn: AsyncConnection, step_id: int, now: dt.datetime) -> bool:
    """A failed step back to pending, due now, with a fresh attempt budget."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.id == step_id, steps.c.status == StepStatus.FAILED)
        .values(
            status=StepStatus.PENDING,
            attempts=0,
            due_at=None,
            last_error=None,
            finished_at=None,
            **guards.released(now),
        )
    )
    return outcome.rowcount == 1


async def cancel_open(conn: AsyncConnection, run_id: int, now: dt.datetime) -> int:
    """Pending steps and parked cues are cancelled; a leased step is left alone, because
    nothing can recall a command already sent."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.run_id == run_id, sa.or_(steps.c.status == StepStatus.PENDING, guards.parked))
        .values(status=StepStatus.CANCELLED, finished_at=now, claimed_by=None, updated_at=now)
    )
    return outcome.rowcount
