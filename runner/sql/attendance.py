"""Statements on ``event_attendance`` (``runner.attendance`` composes them): marks per (run,
member), where the last mark wins, a run's marks, a member's record, and no-show counts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import attendance, definitions, runs
from runner.states import Attendance

Row = sa.RowMapping


async def mark(
    conn: AsyncConnection,
    run_id: int,
    marks: Mapping[str, tuple[str, Attendance]],
    marked_by: str | None,
    now: dt.datetime,
) -> None:
    """Each member's mark (``member_id: (name, status)``), replacing one made before: a row per
    member is made once (a unique key) and then set, so two marks racing leave the later one."""
    if not marks:
        return
    fresh = [
        {"run_id": run_id, "member_id": member_id, "member_name": name[:100], "status": status.value,
         "marked_by": marked_by, "marked_at": now}
        for member_id, (name, status) in marks.items()
    ]  # fmt: skip
    await conn.execute(insert_ignore(conn, attendance), fresh)
    for status in {status for _, status in marks.values()}:
        members = [member_id for member_id, (_, each) in marks.items() if each == status]
        await conn.execute(
            sa.update(attendance)
            .where(attendance.c.run_id == run_id, attendance.c.member_id.in_(members))
            .values(status=status.value, marked_by=marked_by, marked_at=now)
        )


async def for_run(conn: AsyncConnection, run_id: int) -> dict[str, Attendance]:
    query = sa.select(attendance.c.member_id, attendance.c.status).where(attendance.c.run_id == run_id)
    return {str(r.member_id): Attendance(r.status) for r in await conn.execute(query)}


async def record_of(conn: AsyncConnection, member_id: str, limit: int) -> Sequence[Row]:
    """The member's marks, newest run first, with each run's start and event title."""
    query = (
        sa.select(
            attendance.c.run_id,
            attendance.c.status,
            attendance.c.member_name,
            runs.c.scheduled_for,
            definitions.c.title,
        )
        .join(runs, runs.c.id == attendance.c.run_id)
        .join(definitions, definitions.c.id == runs.c.definition_id)
        .where(attendance.c.member_id == member_id)
        .order_by(runs.c.scheduled_for.desc(), attendance.c.run_id.desc())
        .limit(limit)
    )
    return (await conn.execute(query)).mappings().all()


async def counts_of(conn: AsyncConnection, member_ids: Collection[str]) -> dict[str, dict[Attendance, int]]:
    """How many of each mark every one of ``member_ids`` has, over all runs."""
    if not member_ids:
        return {}
    query = (
        sa.select(attendance.c.member_id, attendance.c.status, sa.func.count().label("n"))
        .where(attendance.c.member_id.in_(list(member_ids)))
        .group_by(attendance.c.member_id, attendance.c.status)
    )
    out: dict[str, dict[Attendance, int]] = {}
    for row in await conn.execute(query):
        out.setdefault(str(row.member_id), {})[Attendance(row.status)] = int(row.n)
    return out
