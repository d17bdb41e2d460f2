"""Statements on a run's ``health``: ``ok -> degraded`` once, ``stalled`` while nobody advances
it, and back when it moves. Each answers whether it was the call that changed it, so the line
saying so is written once."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.kinds import Kind
from runner.records import OverdueRun
from runner.schema import run_log, runs
from runner.states import RUN_IN_PROGRESS, Health


async def degrade(conn: AsyncConnection, run_id: int, now: dt.datetime) -> bool:
    """``ok -> degraded``; True only for the call that changed it (so it is logged once)."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.health == Health.OK)
        .values(health=Health.DEGRADED, updated_at=now)
    )
    return result.rowcount == 1


async def find_overdue(conn: AsyncConnection, now: dt.datetime, before: dt.datetime) -> list[OverdueRun]:
    """Runs in progress that wanted a tick before ``before`` and that no live lease holds: nobody
    is advancing them. Reads ``idx_evrun_wake`` only (the range stops at ``before``); status and
    health are checked here for the same planner reason as in ``find_due``."""
    query = sa.select(runs.c.id, runs.c.status, runs.c.health, runs.c.wake_at).where(
        runs.c.wake_at < before,
        sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
    )
    rows = (await conn.execute(query)).mappings().all()
    return [
        OverdueRun.from_row(row)
        for row in rows
        if row["status"] in RUN_IN_PROGRESS and row["health"] != Health.STALLED
    ]


async def stall(conn: AsyncConnection, run_id: int, from_health: Health, now: dt.datetime) -> bool:
    """``ok|degraded -> stalled`` for a run in progress; True only for the call that changed it
    (so ``run.stalled`` is logged once). The caller passes the health it read, and the log line
    keeps it, so the guard also refuses a run whose health moved since."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.health == from_health, runs.c.status.in_(RUN_IN_PROGRESS))
        .values(health=Health.STALLED, updated_at=now)
    )
    return result.rowcount == 1


async def recover(conn: AsyncConnection, run_id: int, now: dt.datetime) -> Health | None:
    """``stalled -> degraded`` if the run was ever degraded (its ``run.degraded`` line is the
    record; ``degrade`` writes one only on ``ok -> degraded``), else ``stalled -> ok``. Answers the
    health restored, or None when the run was not stalled (one statement matching nothing)."""
    was_degraded = (
        sa.select(run_log.c.id)
        .where(run_log.c.run_id == run_id, run_log.c.kind == Kind.RUN_DEGRADED)
        .exists()
    )
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.health == Health.STALLED)
        .values(health=sa.case((was_degraded, Health.DEGRADED.value), else_=Health.OK.value), updated_at=now)
    )
    if result.rowcount != 1:
        return None
    return Health((await conn.execute(sa.select(runs.c.health).where(runs.c.id == run_id))).scalar_one())


async def step_reclaims(conn: AsyncConnection, run_id: int, step_id: int) -> int:
    """How many times the reclaim has handed this step back (its runner died holding it)."""
    query = sa.select(sa.func.count()).where(
        run_log.c.run_id == run_id, run_log.c.step_id == step_id, run_log.c.kind == Kind.STEP_RECLAIMED
    )
    return int((await conn.execute(query)).scalar() or 0)
