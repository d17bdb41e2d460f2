"""Statements on ``event_run_log``: the history every transition and every control writes.

The log is also how front ends learn what happened without sharing memory with the process that
did it: the bot's staff-log poster reads lines after the last id it posted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import run_log

Row = sa.RowMapping


class ActorLike(Protocol):
    @property
    def id(self) -> str | None: ...
    @property
    def name(self) -> str: ...


async def write(
    conn: AsyncConnection,
    run_id: int,
    kind: str,
    at: dt.datetime,
    *,
    step_id: int | None = None,
    actor: ActorLike | str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """One line. New code writes through ``runner.history.record``."""
    if actor is not None and not isinstance(actor, str):
        actor = f"{actor.name} ({actor.id})"[:100] if actor.id else actor.name[:100]
    await conn.execute(
        sa.insert(run_log).values(
            run_id=run_id, step_id=step_id, kind=kind, actor=actor, detail=detail, at=at
        )
    )


async def for_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(run_log).where(run_log.c.run_id == run_id).order_by(run_log.c.id)
    return (await conn.execute(query)).mappings().all()


async def after(conn: AsyncConnection, last_id: int, limit: int = 100) -> Sequence[Row]:
    query = sa.select(run_log).where(run_log.c.id > last_id).order_by(run_log.c.id).limit(limit)
    return (await conn.execute(query)).mappings().all()


async def latest_id(conn: AsyncConnection) -> int:
    return int((await conn.execute(sa.select(sa.func.coalesce(sa.func.max(run_log.c.id), 0)))).scalar() or 0)
