"""Statements on ``event_runs`` about a definition's occurrences (issue 11): the ones its
schedule has already taken, the ones created and not yet started (listed for the schedule people
read, re-pointed when a new version is published).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.records import RunRecord
from runner.schema import runs
from runner.states import RunStatus

Row = sa.RowMapping


async def occurrences_taken(
    conn: AsyncConnection, definition_id: int, after: dt.datetime, until: dt.datetime
) -> set[tuple[dt.datetime, str]]:
    """The ``(occurrence_at, scope)`` pairs of ``uq_evrun_occurrence`` already held in
    ``(after, until]``: a pass that walks them again creates nothing there and must not spend its
    budget on them."""
    query = sa.select(runs.c.occurrence_at, runs.c.scope).where(
        runs.c.definition_id == definition_id, runs.c.occurrence_at > after, runs.c.occurrence_at <= until
    )
    return {(row.occurrence_at, row.scope) for row in (await conn.execute(query)).all()}


async def scheduled_of_definitions(
    conn: AsyncConnection, definition_ids: Sequence[int] | None = None
) -> Sequence[Row]:
    """The live occurrences already created and not yet started (status ``scheduled``), of these
    definitions (all when ``None``), soonest first: what the schedule people read lists by run
    id, so staff can cancel one before it starts. On ``idx_evrun_due`` (status first)."""
    query = (
        sa.select(runs.c.id, runs.c.definition_id, runs.c.scope, runs.c.scheduled_for)
        .where(runs.c.status == RunStatus.SCHEDULED, runs.c.rehearsal.is_(False))
        .order_by(runs.c.scheduled_for, runs.c.id)
    )
    if definition_ids is not None:
        query = query.where(runs.c.definition_id.in_(list(definition_ids)))
    return (await conn.execute(query)).mappings().all()


async def upcoming_of_definition(
    conn: AsyncConnection, definition_id: int, now: dt.datetime
) -> list[RunRecord]:
    """A definition's occurrences not yet started: ``scheduled``, starting after ``now``, live
    (not rehearsals) and of the schedule (not manual). What a new version re-points."""
    query = (
        sa.select(runs)
        .where(
            runs.c.definition_id == definition_id,
            runs.c.status == RunStatus.SCHEDULED,
            runs.c.scheduled_for > now,
            runs.c.rehearsal.is_(False),
            runs.c.occurrence_at.is_not(None),
        )
        .order_by(runs.c.scheduled_for, runs.c.id)
    )
    return [RunRecord.from_row(row) for row in (await conn.execute(query)).mappings().all()]


async def move_start(conn: AsyncConnection, run_id: int, start: dt.datetime, now: dt.datetime) -> bool:
    """A scheduled run starts at ``start`` instead: its occurrence key stays the schedule's
    moment, so the moved occurrence is not booked a second time."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED)
        .values(scheduled_for=start, wake_at=start, nudges=runs.c.nudges + 1, updated_at=now)
    )
    return result.rowcount == 1


async def repoint(
    conn: AsyncConnection,
    run_id: int,
    version_id: int,
    concurrency_key: str | None,
    wake_at: dt.datetime,
    now: dt.datetime,
) -> bool:
    """A scheduled run follows a new version: its version, its key and its wake (a nudge, so a
    reminder visit under way cannot write back the wake it worked out from the old version)."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED)
        .values(
            version_id=version_id,
            concurrency_key=concurrency_key,
            wake_at=wake_at,
            nudges=runs.c.nudges + 1,
            updated_at=now,
        )
    )
    return result.rowcount == 1
