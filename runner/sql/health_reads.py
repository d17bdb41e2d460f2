"""What the health view reads about runs, none of it written here: the live leases and who holds
them, the runs in flight whose health is not ``ok``, and the runs due that nobody has picked up.

Each read walks an index by range (``idx_evrun_lease``, ``idx_evstep_lease``, ``idx_evrun_due``,
``idx_evrun_wake``), so a health check costs the same on a database of a million ended runs as
on one of ten.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import definitions, runs, steps
from runner.states import RUN_IN_FLIGHT, RUN_TICKABLE, Health, StepStatus

Row = sa.RowMapping


async def run_leases(conn: AsyncConnection, now: dt.datetime) -> list[Row]:
    """The runs whose lease is live at ``now``: ``owner``, ``run_id``, ``until``."""
    query = (
        sa.select(
            runs.c.claimed_by.label("owner"),
            runs.c.id.label("run_id"),
            runs.c.claim_expires_at.label("until"),
        )
        .where(runs.c.claim_expires_at >= now, runs.c.claimed_by.is_not(None))
        .order_by(runs.c.id)
    )
    return list((await conn.execute(query)).mappings().all())


async def step_leases(conn: AsyncConnection, now: dt.datetime) -> list[Row]:
    """The steps being performed under a live lease at ``now``: ``owner``, ``run_id``,
    ``step_id``, ``until``. A parked cue has no lease and is nobody's."""
    query = (
        sa.select(
            steps.c.claimed_by.label("owner"),
            steps.c.run_id,
            steps.c.id.label("step_id"),
            steps.c.claim_expires_at.label("until"),
        )
        .where(
            steps.c.status == StepStatus.RUNNING,
            steps.c.claim_expires_at >= now,
            steps.c.claimed_by.is_not(None),
        )
        .order_by(steps.c.id)
    )
    return list((await conn.execute(query)).mappings().all())


def _run_columns() -> list[sa.ColumnElement[object]]:
    return [
        runs.c.id,
        definitions.c.key.label("definition_key"),
        definitions.c.title,
        runs.c.scope,
        runs.c.status,
        runs.c.health,
        runs.c.rehearsal,
        runs.c.wake_at,
        runs.c.last_error,
    ]


async def unwell_runs(conn: AsyncConnection, limit: int) -> tuple[list[Row], int]:
    """Runs in flight that are degraded or stalled, stalled first then oldest first (at most
    ``limit``), and how many there are in all."""
    unwell = sa.and_(runs.c.status.in_(RUN_IN_FLIGHT), runs.c.health != Health.OK)
    query = (
        sa.select(*_run_columns())
        .join(definitions, definitions.c.id == runs.c.definition_id)
        .where(unwell)
        .order_by(sa.case((runs.c.health == Health.STALLED, 0), else_=1), runs.c.id)
        .limit(limit)
    )
    rows = list((await conn.execute(query)).mappings().all())
    total = len(rows)
    if total == limit:
        total = int(
            (await conn.execute(sa.select(sa.func.count()).select_from(runs).where(unwell))).scalar_one()
        )
    return rows, total


async def overdue_wakes(
    conn: AsyncConnection, now: dt.datetime, before: dt.datetime, limit: int
) -> list[Row]:
    """Runs that wanted a tick before ``before`` and that no live lease holds at ``now``: due, and
    nobody has picked them up. Oldest wake first, at most ``limit``. The status is checked here
    for the planner's sake, as in ``run_leases.find_due`` (``wake_at`` is only ever set on a
    tickable run, so it is a guard)."""
    query = (
        sa.select(*_run_columns())
        .join(definitions, definitions.c.id == runs.c.definition_id)
        .where(
            runs.c.wake_at < before,
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
        .order_by(runs.c.wake_at, runs.c.id)
        .limit(limit)
    )
    rows = (await conn.execute(query)).mappings().all()
    return [row for row in rows if row["status"] in RUN_TICKABLE]


async def count_overdue_wakes(conn: AsyncConnection, now: dt.datetime, before: dt.datetime) -> int:
    """How many runs ``overdue_wakes`` would list without its limit. No status condition, for
    the planner's sake: ``wake_at`` is only ever set on a tickable run."""
    query = (
        sa.select(sa.func.count())
        .select_from(runs)
        .where(
            runs.c.wake_at < before,
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
    )
    return int((await conn.execute(query)).scalar_one())
