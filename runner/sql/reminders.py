"""Statements on a run's reminders: steps of the run in phase ``REMINDERS_PHASE``, created with
the run, read, skipped and dropped here. A reminder is claimed and settled by the step
statements (``runner.sql.step_leases``, ``reminder=True``), and the reclaim treats its lease like
any other step's. When a reminder is due is ``runner.reminder_rules``'s to say.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.definitions import REMINDERS_PHASE, EventDefinition, reminder_action
from runner.records import StepRecord
from runner.reminder_rules import moment_of, reminder_label
from runner.schema import runs, steps
from runner.sql.steps import new_idempotency_key
from runner.states import OnFailure, RunStatus, StepStatus


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
                "action_id": reminder_action(reminder.to),
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
) -> bool:
    """Take the run lease of a run that is still ``scheduled``, for a reminder visit; False when
    it started, ended or is held."""
    result = await conn.execute(
        sa.update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.status == RunStatus.SCHEDULED,
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
        .values(claimed_by=owner, claim_expires_at=lease_until)
    )
    return result.rowcount == 1


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
