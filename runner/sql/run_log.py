"""Statements on ``event_run_log``: the history every transition and every control writes.

The log is also how front ends learn what happened without sharing memory with the process that
did it: the bot's staff-log poster reads lines after the last id it posted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import run_log

Row = sa.RowMapping


def line(
    run_id: int,
    kind: str,
    at: dt.datetime,
    step_id: int | None = None,
    actor_id: str | None = None,
    actor_name: str | None = None,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One line's row, as ``write_many`` stores it."""
    return {
        "run_id": run_id,
        "step_id": step_id,
        "kind": kind,
        "actor_id": actor_id,
        "actor_name": actor_name[:100] if actor_name else actor_name,
        "detail": detail,
        "at": at,
    }


async def write_many(conn: AsyncConnection, lines: Sequence[dict[str, Any]]) -> None:
    """Several lines (rows from ``line``) in one statement, in order: their ids ascend as the
    list does, which is the order every reader sorts by."""
    if lines:
        await conn.execute(_INSERT, list(lines))


_INSERT = sa.insert(run_log)


async def for_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(run_log).where(run_log.c.run_id == run_id).order_by(run_log.c.id)
    return (await conn.execute(query)).mappings().all()


async def latest_of_kind(conn: AsyncConnection, run_id: int, kind: str) -> Row | None:
    query = (
        sa.select(run_log)
        .where(run_log.c.run_id == run_id, run_log.c.kind == kind)
        .order_by(run_log.c.id.desc())
        .limit(1)
    )
    return (await conn.execute(query)).mappings().first()


async def after(conn: AsyncConnection, last_id: int, limit: int = 100) -> Sequence[Row]:
    query = sa.select(run_log).where(run_log.c.id > last_id).order_by(run_log.c.id).limit(limit)
    return (await conn.execute(query)).mappings().all()


async def latest_id(conn: AsyncConnection) -> int:
    return int((await conn.execute(sa.select(sa.func.coalesce(sa.func.max(run_log.c.id), 0)))).scalar() or 0)
