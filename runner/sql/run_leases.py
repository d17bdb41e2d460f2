"""Statements on ``event_runs`` that decide who holds a run and when it next needs a tick:
the start and tick leases, their release and reclaim, nudges, and the due and missed finders.

Every statement that decides who owns a run is a compare-and-set whose WHERE clause carries the
state it expects *and* whose SET moves that state, so that under MariaDB's matched-rows count
(``CLIENT_FOUND_ROWS``) the loser of a race matches nothing and is told 0.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.records import DueRun
from runner.schema import definitions, runs, steps
from runner.states import RUN_IN_PROGRESS, RUN_TICKABLE, RunStatus, StepStatus


async def claim_start(
    conn: AsyncConnection, run_id: int, owner: str, lease_until: dt.datetime, now: dt.datetime
) -> bool:
    """``scheduled -> starting``: exactly one caller wins. ``started_at`` is stamped once.

    Taking the run's concurrency slot here is what makes the key hold under a race: a second
    runner starting another run of the same key fails on ``uq_evrun_concurrency_slot``.
    """
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED)
        .values(
            status=RunStatus.STARTING,
            claimed_by=owner,
            claim_expires_at=lease_until,
            started_at=sa.func.coalesce(runs.c.started_at, now),
            concurrency_slot=runs.c.concurrency_key,
            # A run that waited on a concurrency key carries "waiting: ... held by run N" in
            # last_error; once it starts, that is history (the run log keeps it), not its state.
            blocked_by=None,
            last_error=None,
            updated_at=now,
        )
    )
    return result.rowcount == 1


async def claim_tick(
    conn: AsyncConnection, run_id: int, owner: str, lease_until: dt.datetime, now: dt.datetime
) -> bool:
    """Take the lease of a run in flight. No owner-matches escape: a live lease refuses its own
    holder, or one tick that overran into the next would advance one run twice."""
    result = await conn.execute(
        sa.update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.status.in_(RUN_IN_PROGRESS),
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
        .values(claimed_by=owner, claim_expires_at=lease_until)
    )
    return result.rowcount == 1


async def renew_claim(conn: AsyncConnection, run_id: int, owner: str, lease_until: dt.datetime) -> bool:
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.claimed_by == owner, runs.c.claim_expires_at < lease_until)
        .values(claim_expires_at=lease_until)
    )
    return result.rowcount == 1


async def hold_claim(conn: AsyncConnection, run_id: int, owner: str, lease_until: dt.datetime) -> bool:
    """Set the lease of a run we hold to ``lease_until``, earlier or later (a run held in process
    for a wait: the wake + a run lease). False if the run is no longer ours."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.claimed_by == owner, runs.c.claim_expires_at.is_not(None))
        .values(claim_expires_at=lease_until)
    )
    return result.rowcount == 1


async def release_claim(
    conn: AsyncConnection,
    run_id: int,
    owner: str,
    *,
    wake_at: dt.datetime | None,
    nudges_seen: int,
) -> bool:
    """Give the lease back and say when the run next needs a tick.

    The wake time is only written if no control nudged the run while this tick held it.
    """
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.claimed_by == owner)
        .values(
            claimed_by=None,
            claim_expires_at=None,
            wake_at=sa.case(
                (runs.c.status.notin_(RUN_TICKABLE), None),
                (runs.c.nudges == nudges_seen, wake_at),
                else_=runs.c.wake_at,
            ),
        )
    )
    return result.rowcount == 1


async def wake_now(conn: AsyncConnection, run_id: int, now: dt.datetime) -> None:
    """Wake a run at once, for whichever process ticks next (a control changed something the
    tick should act on). The row is the cross-process path; in process, the bus wakes the tick."""
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status.in_(RUN_TICKABLE))
        .values(wake_at=now, nudges=runs.c.nudges + 1)
    )


async def find_due(conn: AsyncConnection, now: dt.datetime, limit: int) -> list[DueRun]:
    """Runs the tick should look at: woken, due, and with no live lease.

    Reads ``idx_evrun_wake`` only: dormant runs (future wake, or NULL for parked, paused and
    ended ones) are never visited. The status is checked here, not in SQL: a status condition
    lets SQLite's planner (without statistics) prefer ``idx_evrun_due`` and walk every waiting
    and parked run. ``wake_at`` is only ever non-NULL on a tickable run, so the check is a guard.
    A scheduled run may be due before its start: its wake is then its next reminder's moment.
    """
    query = (
        sa.select(runs.c.id, runs.c.status, runs.c.concurrency_key, runs.c.scheduled_for)
        .where(
            runs.c.wake_at <= now,
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
        .order_by(runs.c.wake_at, runs.c.id)
        .limit(limit)
    )
    rows = (await conn.execute(query)).mappings().all()
    return [DueRun.from_row(row) for row in rows if row["status"] in RUN_TICKABLE]


_NEVER_LEASED = dt.datetime(1970, 1, 1, tzinfo=dt.UTC).replace(tzinfo=None)


async def next_wake(conn: AsyncConnection, now: dt.datetime) -> dt.datetime | None:
    """The earliest time a tick may have something to do (the serving loop sleeps until then):
    the earliest wake of a run nobody holds, or the earliest end of a live lease (a run held in
    process wakes itself before then; one held by a process that died is due when its lease runs
    out), or the earliest end of a step's lease (one held by a runner that died is handed back
    then). One statement of three index walks (``idx_evrun_wake``, ``idx_evrun_lease``,
    ``idx_evstep_lease``), each stopping at its first row."""
    unheld_wake = (
        sa.select(runs.c.wake_at)
        .where(
            runs.c.wake_at.is_not(None),
            # Not ``IS NULL OR < now``: SQLite's planner would answer that from the lease index
            # (every dormant run) and sort; wrapped, it walks the wake index and stops early.
            sa.func.coalesce(runs.c.claim_expires_at, _NEVER_LEASED) < now,
        )
        .order_by(runs.c.wake_at)
        .limit(1)
        .scalar_subquery()
    )
    # The lease ends include those already past: the tick's reclaim took every lease that had
    # run out by its start, so one past now ran out since, while the tick worked, and wants a
    # tick at once. Only lease ends still to come, they were skipped, and the loop slept to the
    # next (a dead runner's runs whose steps' leases ran out a few ms after the first's waited
    # for their run leases, 1 s more: issue 26 item 6).
    lease_end = (
        sa.select(runs.c.claim_expires_at)
        .where(runs.c.claim_expires_at.is_not(None))
        .order_by(runs.c.claim_expires_at)
        .limit(1)
        .scalar_subquery()
    )
    # A step leased by a runner that died is handed back when its lease ends (the reclaim runs
    # every tick): the tick then is what moves the run on (``idx_evstep_lease``).
    step_lease_end = (
        sa.select(steps.c.claim_expires_at)
        .where(steps.c.status == StepStatus.RUNNING.value, steps.c.claim_expires_at.is_not(None))
        .order_by(steps.c.claim_expires_at)
        .limit(1)
        .scalar_subquery()
    )
    query = sa.select(
        unheld_wake.label("wake"), lease_end.label("lease_end"), step_lease_end.label("step_lease_end")
    )
    row = (await conn.execute(query)).one()
    moments = [moment for moment in (row.wake, row.lease_end, row.step_lease_end) if moment is not None]
    return min(moments) if moments else None


async def let_go_of_dead_holder(conn: AsyncConnection, run_id: int, owner: str) -> bool:
    """Drop the run's lease if ``owner`` holds it: the reclaim found ``owner``'s lease on one of
    the run's steps run out, so ``owner`` is taken for dead and its hold on the run with it.
    Without this the run waited ``after_step`` more for its own lease to run out. A holder that
    was only slow loses nothing it could still use: its settle of the step already fails (the
    step is no longer its), and so does its next claim (the run is no longer its). By primary
    key, as ``reclaim_stale`` updates, so it takes no range lock on the lease index."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.claimed_by == owner, runs.c.claim_expires_at.is_not(None))
        .values(claimed_by=None, claim_expires_at=None)
    )
    return result.rowcount == 1


async def reclaim_stale(conn: AsyncConnection, now: dt.datetime) -> int:
    """Drop run leases whose holder died; ``claim_tick`` would take them anyway, this makes the
    table say so. Read first, then update by primary key: a range UPDATE over the lease index
    deadlocks against other runners moving their own leases through it."""
    stale_ids = (
        (
            await conn.execute(
                sa.select(runs.c.id).where(
                    runs.c.claim_expires_at.is_not(None), runs.c.claim_expires_at < now
                )
            )
        )
        .scalars()
        .all()
    )
    if not stale_ids:
        return 0
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id.in_(stale_ids), runs.c.claim_expires_at < now)
        .values(claimed_by=None, claim_expires_at=None)
    )
    return result.rowcount


async def find_missed(conn: AsyncConnection, now: dt.datetime) -> list[int]:
    """Scheduled runs past their own definition's grace window.

    The range on ``scheduled_for < now`` keeps this on ``idx_evrun_due`` (a run not yet due
    cannot be missed); the grace comparison is made here rather than with backend-specific
    interval arithmetic, so both backends run the same statement.
    """
    query = (
        sa.select(runs.c.id, runs.c.scheduled_for, definitions.c.grace_seconds)
        .join(definitions, definitions.c.id == runs.c.definition_id)
        .where(runs.c.status == RunStatus.SCHEDULED, runs.c.scheduled_for < now)
    )
    # No ORDER BY: sorting by id made MariaDB walk the whole primary key instead of the range.
    rows = (await conn.execute(query)).mappings().all()
    return sorted(
        int(row["id"])
        for row in rows
        if row["scheduled_for"] + dt.timedelta(seconds=int(row["grace_seconds"])) < now
    )
