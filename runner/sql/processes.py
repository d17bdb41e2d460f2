"""Statements on ``runner_processes``: each serving process's heartbeat.

A process writes its own row only (the key is its runner's owner string), so there is nothing to
race for and no compare-and-set: one upsert per beat, a delete when it closes cleanly, and the
rows of processes long gone pruned by the next process to start.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import processes

Row = sa.RowMapping


def _upsert(conn: AsyncConnection, values: dict[str, Any], refresh: list[str]) -> Any:
    """``INSERT`` the row, or update ``refresh`` of it when its owner is there already."""
    if conn.dialect.name == "sqlite":
        insert = sqlite.insert(processes).values(**values)
        return insert.on_conflict_do_update(
            index_elements=[processes.c.owner], set_={name: insert.excluded[name] for name in refresh}
        )
    statement = mysql.insert(processes).values(**values)
    return statement.on_duplicate_key_update({name: statement.inserted[name] for name in refresh})


async def beat(
    conn: AsyncConnection,
    *,
    owner: str,
    host: str,
    pid: int,
    started_at: dt.datetime,
    now: dt.datetime,
    interval_ms: int,
    last_tick_at: dt.datetime | None,
    tick_lag_ms: int | None,
    tick_ms: int | None,
) -> None:
    """This process is alive at ``now``: its row, created on the first beat (a row deleted
    meanwhile, by a prune or a clean close of a namesake, comes back the same way)."""
    values = {
        "owner": owner,
        "host": host[:64],
        "pid": pid,
        "started_at": started_at,
        "last_seen": now,
        "interval_ms": interval_ms,
        "last_tick_at": last_tick_at,
        "tick_lag_ms": tick_lag_ms,
        "tick_ms": tick_ms,
    }
    refresh = ["last_seen", "interval_ms", "last_tick_at", "tick_lag_ms", "tick_ms"]
    await conn.execute(_upsert(conn, values, refresh))


async def forget(conn: AsyncConnection, owner: str) -> None:
    """The process closed cleanly: it holds nothing and will not beat again."""
    await conn.execute(sa.delete(processes).where(processes.c.owner == owner))


async def prune(conn: AsyncConnection, before: dt.datetime) -> int:
    """Drop the rows of processes not seen since ``before`` (they died without closing, long
    ago); answers how many."""
    result = await conn.execute(sa.delete(processes).where(processes.c.last_seen < before))
    return result.rowcount


async def every(conn: AsyncConnection) -> list[Row]:
    """Every row, the longest-running process first."""
    query = sa.select(processes).order_by(processes.c.started_at, processes.c.owner)
    return list((await conn.execute(query)).mappings().all())
