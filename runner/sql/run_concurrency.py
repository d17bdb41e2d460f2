"""Statements on a run's concurrency key: who holds it, who waits on it, and waking the waiters
when the holder lets go. The slot's unique index (``uq_evrun_concurrency_slot``), taken by
``run_leases.claim_start``, is what makes the key hold under a race; these keep the waiting runs
informed."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import runs
from runner.states import RUN_HOLDS_KEY, RunStatus

Row = sa.RowMapping


async def concurrency_holder(conn: AsyncConnection, key: str | None, except_id: int) -> Row | None:
    if not key:
        return None
    query = (
        sa.select(runs.c.id, runs.c.status, runs.c.definition_id, runs.c.scope)
        .where(runs.c.concurrency_key == key, runs.c.id != except_id, runs.c.status.in_(RUN_HOLDS_KEY))
        .order_by(runs.c.id)
        .limit(1)
    )
    return (await conn.execute(query)).mappings().first()


async def mark_blocked(
    conn: AsyncConnection, run_id: int, holder_id: int, error: str, now: dt.datetime, recheck_at: dt.datetime
) -> bool:
    """Record who holds our key and look again at ``recheck_at`` (the holder wakes us sooner
    when it ends). True only when the holder changed, so ``run.blocked`` is logged once."""
    changed = await conn.execute(
        sa.update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.status == RunStatus.SCHEDULED,
            sa.or_(runs.c.blocked_by.is_(None), runs.c.blocked_by != holder_id),
        )
        .values(blocked_by=holder_id, last_error=error[:500], wake_at=recheck_at, updated_at=now)
    )
    if changed.rowcount == 1:
        return True
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED, runs.c.blocked_by == holder_id)
        .values(wake_at=recheck_at)
    )
    return False


async def wake_waiters(conn: AsyncConnection, holder_id: int, now: dt.datetime) -> int:
    """Runs blocked on ``holder_id``'s concurrency key get a tick now that it has let go."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.blocked_by == holder_id, runs.c.status == RunStatus.SCHEDULED)
        .values(wake_at=now, nudges=runs.c.nudges + 1)
    )
    return result.rowcount
