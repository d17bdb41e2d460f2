"""Statements on a run's reminders: steps of the run in phase ``REMINDERS_PHASE``.

A reminder is delivered while its run is still ``scheduled`` (before the occurrence starts), so
the engine's step statements (``runner.sql.step_leases``, whose claim and settle insist on a
``running`` run) do not fit it: these are their counterparts, with the same shapes. The claim is
the one writer of ``attempts`` here too, and the reclaim (``step_leases.reclaim_stale``) treats a
reminder's lease like any other step's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.definitions import REMINDER_ACTION, REMINDERS_PHASE, EventDefinition
from runner.records import StepRecord
from runner.schema import runs, steps
from runner.sql.steps import new_idempotency_key
from runner.states import OnFailure, RunStatus, StepStatus


def reminder_label(definition: EventDefinition, seq: int) -> str:
    reminder = definition.reminders[seq]
    return reminder.label or f"Reminder, {reminder.shown_lead()} before"


def moment_of(definition: EventDefinition, seq: int, starts_at: dt.datetime) -> dt.datetime | None:
    """When reminder ``seq`` of an occurrence starting at ``starts_at`` is due; ``None`` when the
    definition (a version published since) has no such reminder."""
    if seq >= len(definition.reminders):
        return None
    return starts_at - dt.timedelta(seconds=definition.reminders[seq].before)


def reminder_rows(
    run_id: int, definition: EventDefinition, starts_at: dt.datetime, now: dt.datetime
) -> list[dict[str, Any]]:
    rows = []
    for seq, reminder in enumerate(definition.reminders):
        rows.append(
            {
                "run_id": run_id,
                "phase": REMINDERS_PHASE,
                "seq": seq,
                "label": reminder_label(definition, seq),
                "action_id": REMINDER_ACTION,
                "params": dict(reminder.params),
                "action_version": 1,
                # A reminder is a courtesy: its failure must never stop the event.
                "on_failure": OnFailure.SKIP,
                "idempotency_key": new_idempotency_key(),
                "due_at": moment_of(definition, seq, starts_at),
                "created_at": now,
                "updated_at": now,
            }
        )
    return rows


async def materialise(
    conn: AsyncConnection, run_id: int, definition: EventDefinition, starts_at: dt.datetime, now: dt.datetime
) -> int:
    """Create the run's reminders (a no-op for the slots ``uq_evstep_slot`` already holds)."""
    rows = reminder_rows(run_id, definition, starts_at, now)
    if not rows:
        return 0
    result = await conn.execute(insert_ignore(conn, steps), rows)
    return max(result.rowcount, 0)


def earliest_due(definition: EventDefinition, starts_at: dt.datetime) -> dt.datetime:
    """A new run's first wake: its earliest reminder, or its start."""
    return starts_at - dt.timedelta(seconds=definition.longest_reminder_lead())


_PENDING = sa.and_(steps.c.phase == REMINDERS_PHASE, steps.c.status == StepStatus.PENDING)


async def pending(conn: AsyncConnection, run_id: int) -> list[StepRecord]:
    """The run's reminders not yet sent, skipped or cancelled, earliest first."""
    query = sa.select(steps).where(steps.c.run_id == run_id, _PENDING).order_by(steps.c.due_at, steps.c.seq)
    return [StepRecord.from_row(row) for row in (await conn.execute(query)).mappings().all()]


async def of_run(conn: AsyncConnection, run_id: int) -> list[StepRecord]:
    """Every reminder of the run, in the definition's order."""
    query = (
        sa.select(steps)
        .where(steps.c.run_id == run_id, steps.c.phase == REMINDERS_PHASE)
        .order_by(steps.c.seq)
    )
    return [StepRecord.from_row(row) for row in (await conn.execute(query)).mappings().all()]


async def next_pending_due(conn: AsyncConnection, run_id: int) -> dt.datetime | None:
    query = sa.select(sa.func.min(steps.c.due_at)).where(steps.c.run_id == run_id, _PENDING)
    value: dt.datetime | None = (await conn.execute(query)).scalar()
    return value


async def claim_visit(
    conn: AsyncConnection, run_id: int, owner: str, lease_until: dt.datetime, now: dt.datetime
) -> int | None:
    """Lease a run that is still ``scheduled`` for a reminder visit; its ``nudges`` as the lease
    found them (for ``run_leases.release_claim``), or ``None`` when it started, ended or is held."""
    result = await conn.execute(
        sa.update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.status == RunStatus.SCHEDULED,
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
        .values(claimed_by=owner, claim_expires_at=lease_until)
    )
    if result.rowcount != 1:
        return None
    nudges = (await conn.execute(sa.select(runs.c.nudges).where(runs.c.id == run_id))).scalar()
    return int(nudges or 0)


async def claim(
    conn: AsyncConnection,
    step_id: int,
    *,
    run_id: int,
    owner: str,
    lease_until: dt.datetime,
    now: dt.datetime,
) -> bool:
    """``pending -> running`` (leased, ``attempts + 1``), only if due and only while *our* lease
    holds a run that is still ``scheduled``: a start or a cancel committed first wins."""
    run_still_ours = (
        sa.select(sa.literal(1))
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED, runs.c.claimed_by == owner)
        .exists()
    )
    result = await conn.execute(
        sa.update(steps)
        .where(
            steps.c.id == step_id,
            steps.c.phase == REMINDERS_PHASE,
            steps.c.status == StepStatus.PENDING,
            sa.or_(steps.c.due_at.is_(None), steps.c.due_at <= now),
            run_still_ours,
        )
        .values(
            status=StepStatus.RUNNING,
            attempts=steps.c.attempts + 1,
            claimed_by=owner,
            claim_expires_at=lease_until,
            started_at=sa.func.coalesce(steps.c.started_at, now),
            updated_at=now,
        )
    )
    return result.rowcount == 1


def _leased_by(step_id: int, owner: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        steps.c.id == step_id,
        steps.c.status == StepStatus.RUNNING,
        steps.c.claimed_by == owner,
        steps.c.claim_expires_at.is_not(None),
    )


async def finish(
    conn: AsyncConnection,
    step_id: int,
    owner: str,
    status: StepStatus,
    now: dt.datetime,
    *,
    error: str | None = None,
    result: Any = None,
) -> bool:
    """Settle a reminder we hold the lease of. Whatever the run did meanwhile: a message that
    went out went out, and the row must say so (a cancel leaves a leased step to its runner)."""
    values: dict[str, Any] = {
        "status": status,
        "finished_at": now,
        "claimed_by": None,
        "claim_expires_at": None,
        "updated_at": now,
        "last_error": error[:500] if error else None,
    }
    if result is not None:
        values["result"] = result
    outcome = await conn.execute(sa.update(steps).where(_leased_by(step_id, owner)).values(**values))
    return outcome.rowcount == 1


async def reschedule(
    conn: AsyncConnection, step_id: int, owner: str, due_at: dt.datetime, error: str, now: dt.datetime
) -> bool:
    """A transient failure with attempts left: back to pending at ``due_at`` (``attempts`` kept)."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(_leased_by(step_id, owner))
        .values(
            status=StepStatus.PENDING,
            due_at=due_at,
            last_error=error[:500],
            claimed_by=None,
            claim_expires_at=None,
            updated_at=now,
        )
    )
    return outcome.rowcount == 1


async def skip(conn: AsyncConnection, step_ids: Sequence[int], note: str, now: dt.datetime) -> list[int]:
    """``pending -> skipped`` for those of ``step_ids`` still pending; the ids it moved."""
    if not step_ids:
        return []
    still = (
        (
            await conn.execute(
                sa.select(steps.c.id).where(
                    steps.c.id.in_(list(step_ids)), steps.c.status == StepStatus.PENDING
                )
            )
        )
        .scalars()
        .all()
    )
    if not still:
        return []
    await conn.execute(
        sa.update(steps)
        .where(steps.c.id.in_(still), steps.c.status == StepStatus.PENDING)
        .values(status=StepStatus.SKIPPED, finished_at=now, note=note[:500], updated_at=now)
    )
    return [int(each) for each in still]


async def pending_ids(conn: AsyncConnection, run_id: int) -> list[int]:
    query = sa.select(steps.c.id).where(steps.c.run_id == run_id, _PENDING).order_by(steps.c.seq)
    return [int(each) for each in (await conn.execute(query)).scalars().all()]


async def set_wake(conn: AsyncConnection, run_id: int, wake_at: dt.datetime, nudges_seen: int) -> bool:
    """Move a scheduled run's wake (after its reminders changed), unless a control nudged it
    since ``nudges_seen`` was read (the nudge's own wake stands) or it is no longer scheduled."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED, runs.c.nudges == nudges_seen)
        .values(wake_at=wake_at)
    )
    return result.rowcount == 1


async def drop_unclaimed(conn: AsyncConnection, run_id: int) -> int:
    """Delete the run's steps nobody ever claimed (pending, no attempt): a run not yet started
    that follows a new version gets them again from it. A step a dispatch has seen (its key
    may have been sent) is never dropped."""
    result = await conn.execute(
        sa.delete(steps).where(
            steps.c.run_id == run_id, steps.c.status == StepStatus.PENDING, steps.c.attempts == 0
        )
    )
    return max(result.rowcount, 0)


async def pending_beyond(conn: AsyncConnection, run_id: int, count: int) -> list[int]:
    """Pending reminders whose slot a new version no longer has (``seq >= count``)."""
    query = sa.select(steps.c.id).where(steps.c.run_id == run_id, _PENDING, steps.c.seq >= count)
    return [int(each) for each in (await conn.execute(query)).scalars().all()]
