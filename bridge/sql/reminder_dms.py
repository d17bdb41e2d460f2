"""Statements on reminders sent by direct message: ``event_reminder_dms`` (a row per member and
reminder of a run, written once, claimed before the DM and settled after) and
``member_dm_settings`` (who turned them off).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import dm_settings, reminder_dms, runs

Row = sa.RowMapping


async def turned_off(conn: AsyncConnection, member_ids: Sequence[str]) -> set[str]:
    """Those of ``member_ids`` who turned reminders by DM off."""
    if not member_ids:
        return set()
    query = sa.select(dm_settings.c.member_id).where(
        dm_settings.c.member_id.in_(list(member_ids)), dm_settings.c.reminders_off.is_(True)
    )
    return {str(each) for each in (await conn.execute(query)).scalars().all()}


async def write_once(conn: AsyncConnection, row: dict[str, Any]) -> bool:
    """The member's row for this reminder of the run; False when it was written before (by an
    earlier attempt of the reminder, or another process): the unique key ignores the second."""
    result = await conn.execute(insert_ignore(conn, reminder_dms).values(**row))
    return result.rowcount == 1


async def open_rows(conn: AsyncConnection, now: dt.datetime, limit: int) -> Sequence[Row]:
    """Rows not settled that nobody holds a live lease on, oldest first, with their run's status
    and start."""
    query = (
        sa.select(reminder_dms, runs.c.status.label("run_status"), runs.c.scheduled_for)
        .join(runs, runs.c.id == reminder_dms.c.run_id)
        .where(
            reminder_dms.c.settled_at.is_(None),
            sa.or_(reminder_dms.c.lease_until.is_(None), reminder_dms.c.lease_until <= now),
        )
        .order_by(reminder_dms.c.id)
        .limit(limit)
    )
    return (await conn.execute(query)).mappings().all()


async def next_lease_end(conn: AsyncConnection) -> dt.datetime | None:
    """When the first lease on a row not settled runs out (a retry, or a sender that died)."""
    query = sa.select(sa.func.min(reminder_dms.c.lease_until)).where(reminder_dms.c.settled_at.is_(None))
    value: dt.datetime | None = (await conn.execute(query)).scalar()
    return value


async def claim(conn: AsyncConnection, row_id: int, owner: str, now: dt.datetime, until: dt.datetime) -> bool:
    """Compare-and-set on the lease: moves ``lease_until`` past ``now``, so a second claimer in
    the same instant matches nothing."""
    result = await conn.execute(
        sa.update(reminder_dms)
        .where(
            reminder_dms.c.id == row_id,
            reminder_dms.c.settled_at.is_(None),
            sa.or_(reminder_dms.c.lease_until.is_(None), reminder_dms.c.lease_until <= now),
        )
        .values(claimed_by=owner, lease_until=until, attempts=reminder_dms.c.attempts + 1)
    )
    return result.rowcount == 1


async def settle(
    conn: AsyncConnection,
    row_id: int,
    owner: str,
    now: dt.datetime,
    *,
    settled_as: str | None,
    error: str | None,
    retry_at: dt.datetime | None = None,
) -> bool:
    """Settled (``dm``, ``mention``, ``dropped``, ``failed``), or not this time (``error``, tried
    again after ``retry_at``); only by the lease's holder."""
    values: dict[str, Any] = {"last_error": error[:500] if error else None}
    if settled_as is not None:
        values.update(settled_at=now, settled_as=settled_as)
    else:
        values.update(lease_until=retry_at or now)
    result = await conn.execute(
        sa.update(reminder_dms)
        .where(
            reminder_dms.c.id == row_id,
            reminder_dms.c.claimed_by == owner,
            reminder_dms.c.settled_at.is_(None),
        )
        .values(**values)
    )
    return result.rowcount == 1


async def rows_of_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(reminder_dms).where(reminder_dms.c.run_id == run_id).order_by(reminder_dms.c.id)
    return (await conn.execute(query)).mappings().all()


async def reminders_off(conn: AsyncConnection, member_id: str) -> bool:
    query = sa.select(dm_settings.c.reminders_off).where(dm_settings.c.member_id == member_id)
    return bool((await conn.execute(query)).scalar())


async def set_reminders_off(conn: AsyncConnection, member_id: str, off: bool, now: dt.datetime) -> None:
    """The member's choice, written over the one before (two presses at once: the last stands)."""
    updated = await conn.execute(
        sa.update(dm_settings)
        .where(dm_settings.c.member_id == member_id)
        .values(reminders_off=off, updated_at=now)
    )
    if updated.rowcount == 0:
        await conn.execute(
            insert_ignore(conn, dm_settings).values(member_id=member_id, reminders_off=off, updated_at=now)
        )
