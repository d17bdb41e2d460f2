"""Statements on the cleanup ledger (``event_run_undos``) and a run's ``cleanup_status``
(``runner.engine.cleanup`` composes them).

An entry is claimed by an UPDATE that the server answers, as a step is: it moves the claim's
expiry and adds one to ``attempts`` in the same statement, so a matched row is always a changed
row (under CLIENT_FOUND_ROWS a no-op UPDATE would report 1) and a claim taken over after a crash
never resets the count. Only a run's last open entry may be claimed: the cleanup undoes in
reverse order, and an entry waits for every later one to be done or failed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import run_undos, runs
from runner.states import UNDO_OPEN, CleanupStatus, UndoStatus

Row = sa.RowMapping
_OPEN = [s.value for s in UNDO_OPEN]


async def record(
    conn: AsyncConnection,
    *,
    run_id: int,
    step_id: int,
    label: str | None,
    action_id: str | None,
    params: dict[str, Any] | None,
    idempotency_key: str,
    status: UndoStatus,
    now: dt.datetime,
) -> None:
    await conn.execute(
        sa.insert(run_undos).values(
            run_id=run_id,
            step_id=step_id,
            label=label[:200] if label else None,
            action_id=action_id,
            params=params,
            idempotency_key=idempotency_key,
            status=status.value,
            created_at=now,
        )
    )


async def for_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    """The run's ledger, latest first (the order the cleanup undoes it in)."""
    query = sa.select(run_undos).where(run_undos.c.run_id == run_id).order_by(run_undos.c.id.desc())
    return (await conn.execute(query)).mappings().all()


async def begin_cleanup(conn: AsyncConnection, run_id: int) -> None:
    """In a cancel's transaction: the run's cleanup is ``pending``."""
    await conn.execute(
        sa.update(runs).where(runs.c.id == run_id).values(cleanup_status=CleanupStatus.PENDING.value)
    )


async def reopen_cleanup(conn: AsyncConnection, run_id: int) -> None:
    """A late entry (its step came back after the cancel): a cleanup that finished looks again."""
    finished = [CleanupStatus.DONE.value, CleanupStatus.FAILED.value]
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.cleanup_status.in_(finished))
        .values(cleanup_status=CleanupStatus.PENDING.value)
    )


async def runs_pending(conn: AsyncConnection, limit: int) -> list[int]:
    query = (
        sa.select(runs.c.id)
        .where(runs.c.cleanup_status == CleanupStatus.PENDING.value)
        .order_by(runs.c.id)
        .limit(limit)
    )
    return [int(r) for r in (await conn.execute(query)).scalars()]


async def last_open(conn: AsyncConnection, run_id: int) -> Row | None:
    """The run's latest entry still to undo (recorded, or running under a claim)."""
    query = (
        sa.select(run_undos)
        .where(run_undos.c.run_id == run_id, run_undos.c.status.in_(_OPEN))
        .order_by(run_undos.c.id.desc())
        .limit(1)
    )
    return (await conn.execute(query)).mappings().first()


async def claim(
    conn: AsyncConnection, undo_id: int, owner: str, now: dt.datetime, until: dt.datetime
) -> bool:
    """``recorded`` (its retry time come) or ``running`` under a claim that ran out ->
    ``running``, claimed by ``owner`` until ``until``; True for exactly one claimer."""
    claimable = sa.or_(
        sa.and_(
            run_undos.c.status == UndoStatus.RECORDED.value,
            sa.or_(run_undos.c.retry_at.is_(None), run_undos.c.retry_at <= now),
        ),
        sa.and_(run_undos.c.status == UndoStatus.RUNNING.value, run_undos.c.claim_expires_at <= now),
    )
    result = await conn.execute(
        sa.update(run_undos)
        .where(run_undos.c.id == undo_id, claimable)
        .values(
            status=UndoStatus.RUNNING.value,
            claimed_by=owner,
            claim_expires_at=until,
            attempts=run_undos.c.attempts + 1,
        )
    )
    return result.rowcount == 1


async def settle(
    conn: AsyncConnection,
    undo_id: int,
    owner: str,
    status: UndoStatus,
    now: dt.datetime,
    *,
    result: dict[str, Any] | None = None,
    error: str | None = None,
    retry_at: dt.datetime | None = None,
) -> bool:
    """The claimer's answer: done, failed, or ``recorded`` again to retry at ``retry_at``; False
    when the claim was taken over meanwhile (the taker answers)."""
    finished = now if status in (UndoStatus.DONE, UndoStatus.FAILED) else None
    outcome = await conn.execute(
        sa.update(run_undos)
        .where(
            run_undos.c.id == undo_id,
            run_undos.c.claimed_by == owner,
            run_undos.c.status == UndoStatus.RUNNING.value,
        )
        .values(
            status=status.value,
            claimed_by=None,
            claim_expires_at=None,
            retry_at=retry_at,
            result=result,
            last_error=error[:500] if error else None,
            finished_at=finished,
        )
    )
    return outcome.rowcount == 1


async def finish_cleanup(conn: AsyncConnection, run_id: int) -> CleanupStatus | None:
    """Once no entry is open: ``done``, or ``failed`` when one could not be undone; None while
    entries remain (or another process finished it first)."""
    if await last_open(conn, run_id) is not None:
        return None
    failed = await conn.scalar(
        sa.select(sa.func.count())
        .select_from(run_undos)
        .where(run_undos.c.run_id == run_id, run_undos.c.status == UndoStatus.FAILED.value)
    )
    status = CleanupStatus.FAILED if failed else CleanupStatus.DONE
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.cleanup_status == CleanupStatus.PENDING.value)
        .values(cleanup_status=status.value)
    )
    return status if result.rowcount == 1 else None
