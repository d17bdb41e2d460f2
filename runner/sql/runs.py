"""Statements on ``event_runs``.

Every statement that decides who owns a run is a compare-and-set whose WHERE clause carries the
state it expects *and* whose SET moves that state, so that under MariaDB's matched-rows count
(``CLIENT_FOUND_ROWS``) the loser of a race matches nothing and is told 0. The one deliberate
exception is ``transition(running -> running)``, where "still running" is the answer wanted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import (
    RUN_HOLDS_KEY,
    RUN_IN_FLIGHT,
    RUN_IN_PROGRESS,
    RUN_TERMINAL,
    RUN_TICKABLE,
    definitions,
    run_log,
    runs,
)

Row = sa.RowMapping


async def insert(
    conn: AsyncConnection,
    *,
    definition_id: int,
    version_id: int,
    scope: str,
    scheduled_for: dt.datetime,
    concurrency_key: str | None,
    now: dt.datetime,
    rehearsal: bool = False,
    started_by: str | None = None,
) -> int | None:
    """Create one occurrence; ``None`` when ``uq_evrun_occurrence`` already holds it."""
    result = await conn.execute(
        insert_ignore(conn, runs).values(
            definition_id=definition_id,
            version_id=version_id,
            scope=scope,
            scheduled_for=scheduled_for,
            concurrency_key=concurrency_key,
            rehearsal=rehearsal,
            started_by=started_by,
            wake_at=scheduled_for,
            created_at=now,
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        return None
    return int(result.inserted_primary_key[0])


async def get(conn: AsyncConnection, run_id: int) -> Row | None:
    return (await conn.execute(sa.select(runs).where(runs.c.id == run_id))).mappings().first()


async def get_for_update(conn: AsyncConnection, run_id: int) -> Row | None:
    """The run, locked until the transaction ends (MariaDB; SQLite's ``BEGIN IMMEDIATE`` already
    serialises writers). A control that decides from the status it read needs that status to hold
    until it writes: under READ COMMITTED a plain read lets a resume slip in between, and the
    cancel that read ``paused`` would then refuse a run that is still in flight."""
    query = sa.select(runs).where(runs.c.id == run_id).with_for_update()
    return (await conn.execute(query)).mappings().first()


async def claim_start(
    conn: AsyncConnection, run_id: int, owner: str, lease_until: dt.datetime, now: dt.datetime
) -> bool:
    """``scheduled -> starting``: exactly one caller wins. ``started_at`` is stamped once.

    Taking the run's concurrency slot here is what makes the key hold under a race: a second
    runner starting another run of the same key fails on ``uq_evrun_concurrency_slot``.
    """
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == "scheduled")
        .values(
            status="starting",
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
            runs.c.status.in_(("starting", "running", "ending")),
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


async def nudge(conn: AsyncConnection, run_id: int, now: dt.datetime) -> None:
    """Wake a run at once (after a control changed something the tick should act on)."""
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status.in_(RUN_TICKABLE))
        .values(wake_at=now, nudges=runs.c.nudges + 1)
    )


async def transition(
    conn: AsyncConnection,
    run_id: int,
    from_statuses: str | Iterable[str],
    to: str,
    now: dt.datetime,
    *,
    phase: str | None = None,
    error: str | None = None,
    wake_at: dt.datetime | None = None,
) -> bool:
    """A guarded status move; 0 rows means the run was no longer in ``from_statuses``.

    Terminal statuses stamp ``ended_at`` once, drop the lease, free the concurrency slot and
    wake the runs that were waiting for it.
    """
    froms = (from_statuses,) if isinstance(from_statuses, str) else tuple(from_statuses)
    values: dict[str, Any] = {"status": to, "updated_at": now}
    if phase is not None:
        values["current_phase"] = phase
    if error is not None:
        values["last_error"] = error[:500]
    if to in RUN_TERMINAL:
        values.update(
            ended_at=sa.func.coalesce(runs.c.ended_at, now),
            claimed_by=None,
            claim_expires_at=None,
            concurrency_slot=None,
            wake_at=None,
        )
    elif to == "paused":
        values["wake_at"] = None
    elif wake_at is not None:
        values["wake_at"] = wake_at
        values["nudges"] = runs.c.nudges + 1
    result = await conn.execute(
        sa.update(runs).where(runs.c.id == run_id, runs.c.status.in_(froms)).values(**values)
    )
    moved = result.rowcount == 1
    if moved and to in RUN_TERMINAL:
        await wake_waiters(conn, run_id, now)
    return moved


async def degrade(conn: AsyncConnection, run_id: int, now: dt.datetime) -> bool:
    """``ok -> degraded``; True only for the call that changed it (so it is logged once)."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.health == "ok")
        .values(health="degraded", updated_at=now)
    )
    return result.rowcount == 1


async def find_overdue(conn: AsyncConnection, now: dt.datetime, before: dt.datetime) -> Sequence[Row]:
    """Runs in progress that wanted a tick before ``before`` and that no live lease holds: nobody
    is advancing them. Reads ``idx_evrun_wake`` only (the range stops at ``before``); status and
    health are checked here for the same planner reason as in ``find_due``."""
    query = sa.select(runs.c.id, runs.c.status, runs.c.health, runs.c.wake_at).where(
        runs.c.wake_at < before,
        sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
    )
    rows = (await conn.execute(query)).mappings().all()
    return [row for row in rows if row["status"] in RUN_IN_PROGRESS and row["health"] != "stalled"]


async def stall(conn: AsyncConnection, run_id: int, from_health: str, now: dt.datetime) -> bool:
    """``ok|degraded -> stalled`` for a run in progress; True only for the call that changed it
    (so ``run.stalled`` is logged once). The caller passes the health it read, and the log line
    keeps it, so the guard also refuses a run whose health moved since."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.health == from_health, runs.c.status.in_(RUN_IN_PROGRESS))
        .values(health="stalled", updated_at=now)
    )
    return result.rowcount == 1


async def recover(conn: AsyncConnection, run_id: int, now: dt.datetime) -> str | None:
    """``stalled -> degraded`` if the run was ever degraded (its ``run.degraded`` line is the
    record; ``degrade`` writes one only on ``ok -> degraded``), else ``stalled -> ok``. Answers the
    health restored, or None when the run was not stalled (one statement matching nothing)."""
    was_degraded = (
        sa.select(run_log.c.id).where(run_log.c.run_id == run_id, run_log.c.kind == "run.degraded").exists()
    )
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.health == "stalled")
        .values(health=sa.case((was_degraded, "degraded"), else_="ok"), updated_at=now)
    )
    if result.rowcount != 1:
        return None
    return str((await conn.execute(sa.select(runs.c.health).where(runs.c.id == run_id))).scalar())


async def step_reclaims(conn: AsyncConnection, run_id: int, step_id: int) -> int:
    """How many times the reclaim has handed this step back (its runner died holding it)."""
    query = sa.select(sa.func.count()).where(
        run_log.c.run_id == run_id, run_log.c.step_id == step_id, run_log.c.kind == "step.reclaimed"
    )
    return int((await conn.execute(query)).scalar() or 0)


async def set_last_error(conn: AsyncConnection, run_id: int, error: str | None, now: dt.datetime) -> None:
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id)
        .values(last_error=error[:500] if error else None, updated_at=now)
    )


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
            runs.c.status == "scheduled",
            sa.or_(runs.c.blocked_by.is_(None), runs.c.blocked_by != holder_id),
        )
        .values(blocked_by=holder_id, last_error=error[:500], wake_at=recheck_at, updated_at=now)
    )
    if changed.rowcount == 1:
        return True
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == "scheduled", runs.c.blocked_by == holder_id)
        .values(wake_at=recheck_at)
    )
    return False


async def wake_waiters(conn: AsyncConnection, holder_id: int, now: dt.datetime) -> int:
    """Runs blocked on ``holder_id``'s concurrency key get a tick now that it has let go."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.blocked_by == holder_id, runs.c.status == "scheduled")
        .values(wake_at=now, nudges=runs.c.nudges + 1)
    )
    return result.rowcount


async def occurrences_taken(
    conn: AsyncConnection, definition_id: int, after: dt.datetime, until: dt.datetime
) -> set[tuple[dt.datetime, str]]:
    """The ``(scheduled_for, scope)`` pairs of ``uq_evrun_occurrence`` already held in
    ``(after, until]``: a pass that walks them again creates nothing there and must not spend its
    budget on them."""
    query = sa.select(runs.c.scheduled_for, runs.c.scope).where(
        runs.c.definition_id == definition_id, runs.c.scheduled_for > after, runs.c.scheduled_for <= until
    )
    return {(row.scheduled_for, row.scope) for row in (await conn.execute(query)).all()}


async def find_due(conn: AsyncConnection, now: dt.datetime, limit: int) -> Sequence[Row]:
    """Runs the tick should look at: woken, due, and with no live lease.

    Reads ``idx_evrun_wake`` only: dormant runs (future wake, or NULL for parked, paused and
    ended ones) are never visited. The status is checked here, not in SQL: a status condition
    lets SQLite's planner (without statistics) prefer ``idx_evrun_due`` and walk every waiting
    and parked run. ``wake_at`` is only ever non-NULL on a tickable run, so the check is a guard.
    """
    query = (
        sa.select(runs.c.id, runs.c.status, runs.c.scheduled_for, runs.c.concurrency_key)
        .where(
            runs.c.wake_at <= now,
            runs.c.scheduled_for <= now,
            sa.or_(runs.c.claim_expires_at.is_(None), runs.c.claim_expires_at < now),
        )
        .order_by(runs.c.wake_at, runs.c.id)
        .limit(limit)
    )
    rows = (await conn.execute(query)).mappings().all()
    return [row for row in rows if row["status"] in RUN_TICKABLE]


async def next_wake(conn: AsyncConnection) -> dt.datetime | None:
    """The earliest time any run wants a tick (the bot's loop sleeps until then)."""
    return (await conn.execute(sa.select(sa.func.min(runs.c.wake_at)))).scalar()


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
        .where(runs.c.status == "scheduled", runs.c.scheduled_for < now)
    )
    # No ORDER BY: sorting by id made MariaDB walk the whole primary key instead of the range.
    rows = (await conn.execute(query)).mappings().all()
    return sorted(
        int(row["id"])
        for row in rows
        if row["scheduled_for"] + dt.timedelta(seconds=int(row["grace_seconds"])) < now
    )


async def set_phase_hold(conn: AsyncConnection, run_id: int, due_at: dt.datetime) -> bool:
    """Hold the next phase's first step (not yet materialised); never pulls a hold earlier."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, sa.or_(runs.c.held_until.is_(None), runs.c.held_until < due_at))
        .values(held_until=due_at)
    )
    return result.rowcount == 1


async def take_phase_hold(conn: AsyncConnection, run_id: int) -> None:
    await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(held_until=None))


async def live_in_flight(
    conn: AsyncConnection, definition_id: int, scopes: Sequence[str], now: dt.datetime
) -> list[tuple[str, int]]:
    """(scope, run id) of live (not rehearsal) runs of a definition already under way in those
    scopes: what a second start of the same event would collide with."""
    query = sa.select(runs.c.scope, runs.c.id).where(
        runs.c.definition_id == definition_id,
        runs.c.scope.in_(scopes),
        runs.c.status.in_(RUN_IN_FLIGHT),
        runs.c.rehearsal.is_(False),
        runs.c.scheduled_for <= now,
    )
    return [(row.scope, int(row.id)) for row in (await conn.execute(query)).all()]


async def list_runs(
    conn: AsyncConnection,
    *,
    statuses: Sequence[str] | None = None,
    definition_id: int | None = None,
    limit: int = 50,
) -> Sequence[Row]:
    query = (
        sa.select(
            runs, definitions.c.key.label("definition_key"), definitions.c.title.label("definition_title")
        )
        .join(definitions, definitions.c.id == runs.c.definition_id)
        .order_by(runs.c.id.desc())
        .limit(limit)
    )
    if statuses:
        query = query.where(runs.c.status.in_(statuses))
    if definition_id is not None:
        query = query.where(runs.c.definition_id == definition_id)
    return (await conn.execute(query)).mappings().all()
