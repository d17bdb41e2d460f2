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
from runner.records import DueRun, RunRecord
from runner.schema import definitions, runs
from runner.sql.run_concurrency import wake_waiters as wake_blocked
from runner.states import RUN_IN_FLIGHT, RUN_IN_PROGRESS, RUN_TERMINAL, RUN_TICKABLE, RunStatus

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
    manual: bool = False,
    wake_at: dt.datetime | None = None,
) -> int | None:
    """Create one occurrence; ``None`` when ``uq_evrun_occurrence`` already holds it. A
    ``manual`` run (started by hand) is no occurrence: it holds no key and never collides.
    ``wake_at``: its first wake when that comes before its start (its first reminder)."""
    result = await conn.execute(
        insert_ignore(conn, runs).values(
            definition_id=definition_id,
            version_id=version_id,
            scope=scope,
            scheduled_for=scheduled_for,
            occurrence_at=None if manual else scheduled_for,
            concurrency_key=concurrency_key,
            rehearsal=rehearsal,
            started_by=started_by,
            wake_at=scheduled_for if wake_at is None else min(wake_at, scheduled_for),
            created_at=now,
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        return None
    inserted = result.inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


_INSERT = sa.insert(runs)


async def insert_leased(
    conn: AsyncConnection,
    *,
    definition_id: int,
    version_id: int,
    scope: str,
    phase: str,
    owner: str,
    lease_until: dt.datetime,
    now: dt.datetime,
    rehearsal: bool = False,
    started_by: str | None = None,
) -> RunRecord:
    """A manual start the starting process drives at once: created ``running`` in ``phase``,
    leased to ``owner``. No occurrence key and no concurrency key (a run with a key starts
    through ``claim_start``, which takes its slot). ``wake_at`` is now, so if the owner dies
    before giving the lease back the run is found the moment the lease runs out."""
    values: dict[str, Any] = {
        "definition_id": definition_id,
        "version_id": version_id,
        "scope": scope,
        "status": RunStatus.RUNNING,
        "health": "ok",
        "current_phase": phase,
        "scheduled_for": now,
        "occurrence_at": None,
        "concurrency_key": None,
        "rehearsal": rehearsal,
        "started_by": started_by,
        "started_at": now,
        "ended_at": None,
        "claimed_by": owner,
        "claim_expires_at": lease_until,
        "last_error": None,
        "wake_at": now,
        "held_until": None,
        "blocked_by": None,
        "concurrency_slot": None,
        "nudges": 0,
        "created_at": now,
        "updated_at": now,
    }
    result = await conn.execute(_INSERT, values)
    inserted = result.inserted_primary_key
    assert inserted is not None
    return RunRecord.from_row({**values, "id": int(inserted[0])})


async def get(conn: AsyncConnection, run_id: int) -> RunRecord | None:
    row = (await conn.execute(sa.select(runs).where(runs.c.id == run_id))).mappings().first()
    return None if row is None else RunRecord.from_row(row)


async def get_for_update(conn: AsyncConnection, run_id: int) -> RunRecord | None:
    """The run, locked until the transaction ends (MariaDB; SQLite's ``BEGIN IMMEDIATE`` already
    serialises writers). A control that decides from the status it read needs that status to hold
    until it writes: under READ COMMITTED a plain read lets a resume slip in between, and the
    cancel that read ``paused`` would then refuse a run that is still in flight."""
    query = sa.select(runs).where(runs.c.id == run_id).with_for_update()
    row = (await conn.execute(query)).mappings().first()
    return None if row is None else RunRecord.from_row(row)


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
    from_statuses: RunStatus | Iterable[RunStatus],
    to: RunStatus,
    now: dt.datetime,
    *,
    phase: str | None = None,
    error: str | None = None,
    wake_at: dt.datetime | None = None,
    wake_waiters: bool = True,
) -> bool:
    """A guarded status move; 0 rows means the run was no longer in ``from_statuses``. Called by
    ``lifecycle`` only, which checks the edge and writes the move's line.

    Terminal statuses stamp ``ended_at`` once, drop the lease, free the concurrency slot and
    wake the runs that were waiting for it.
    """
    froms = (from_statuses,) if isinstance(from_statuses, str) else tuple(from_statuses)
    if to in RUN_TERMINAL and phase is None and error is None:
        parameters = {"b_run": run_id, "b_froms": list(froms), "b_to": to, "b_at": now}
        moved = (await conn.execute(_END, parameters)).rowcount == 1
        if moved and wake_waiters:
            await wake_blocked(conn, run_id, now)
        return moved
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
    elif to == RunStatus.PAUSED:
        values["wake_at"] = None
    elif wake_at is not None:
        values["wake_at"] = wake_at
        values["nudges"] = runs.c.nudges + 1
    result = await conn.execute(
        sa.update(runs).where(runs.c.id == run_id, runs.c.status.in_(froms)).values(**values)
    )
    moved = result.rowcount == 1
    if moved and to in RUN_TERMINAL and wake_waiters:
        await wake_blocked(conn, run_id, now)
    return moved


# The terminal move of ``transition`` (no phase, no error) built once: every run's end sends it.
_END = (
    sa.update(runs)
    .where(runs.c.id == sa.bindparam("b_run"), runs.c.status.in_(sa.bindparam("b_froms", expanding=True)))
    .values(
        status=sa.bindparam("b_to"),
        updated_at=sa.bindparam("b_at"),
        ended_at=sa.func.coalesce(runs.c.ended_at, sa.bindparam("b_at")),
        claimed_by=None,
        claim_expires_at=None,
        concurrency_slot=None,
        wake_at=None,
    )
)


async def set_last_error(conn: AsyncConnection, run_id: int, error: str | None, now: dt.datetime) -> None:
    await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id)
        .values(last_error=error[:500] if error else None, updated_at=now)
    )


async def occurrences_taken(
    conn: AsyncConnection, definition_id: int, after: dt.datetime, until: dt.datetime
) -> set[tuple[dt.datetime, str]]:
    """The ``(occurrence_at, scope)`` pairs of ``uq_evrun_occurrence`` already held in
    ``(after, until]``: a pass that walks them again creates nothing there and must not spend its
    budget on them."""
    query = sa.select(runs.c.occurrence_at, runs.c.scope).where(
        runs.c.definition_id == definition_id, runs.c.occurrence_at > after, runs.c.occurrence_at <= until
    )
    return {(row.occurrence_at, row.scope) for row in (await conn.execute(query)).all()}


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
    out). One statement of two index walks (``idx_evrun_wake``, ``idx_evrun_lease``), each
    stopping at its first row."""
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
    lease_end = (
        sa.select(runs.c.claim_expires_at)
        .where(runs.c.claim_expires_at >= now)
        .order_by(runs.c.claim_expires_at)
        .limit(1)
        .scalar_subquery()
    )
    row = (await conn.execute(sa.select(unheld_wake.label("wake"), lease_end.label("lease_end")))).one()
    moments = [moment for moment in (row.wake, row.lease_end) if moment is not None]
    return min(moments) if moments else None


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
    parameters = {"b_definition": definition_id, "b_scopes": list(scopes), "b_now": now}
    return [(row.scope, int(row.id)) for row in (await conn.execute(_LIVE_IN_FLIGHT, parameters)).all()]


# Built once with bound parameters: every start sends it.
_LIVE_IN_FLIGHT = sa.select(runs.c.scope, runs.c.id).where(
    runs.c.definition_id == sa.bindparam("b_definition"),
    runs.c.scope.in_(sa.bindparam("b_scopes", expanding=True)),
    runs.c.status.in_(RUN_IN_FLIGHT),
    runs.c.rehearsal.is_(False),
    runs.c.scheduled_for <= sa.bindparam("b_now"),
)


async def list_runs(
    conn: AsyncConnection,
    *,
    statuses: Iterable[RunStatus] | None = None,
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


async def scheduled_of_definitions(
    conn: AsyncConnection, definition_ids: Sequence[int] | None = None
) -> Sequence[Row]:
    """The live occurrences already created and not yet started (status ``scheduled``), of these
    definitions (all when ``None``), soonest first: what the schedule people read lists by run
    id, so staff can cancel one before it starts. On ``idx_evrun_due`` (status first)."""
    query = (
        sa.select(runs.c.id, runs.c.definition_id, runs.c.scope, runs.c.scheduled_for)
        .where(runs.c.status == RunStatus.SCHEDULED, runs.c.rehearsal.is_(False))
        .order_by(runs.c.scheduled_for, runs.c.id)
    )
    if definition_ids is not None:
        query = query.where(runs.c.definition_id.in_(list(definition_ids)))
    return (await conn.execute(query)).mappings().all()


async def upcoming_of_definition(
    conn: AsyncConnection, definition_id: int, now: dt.datetime
) -> list[RunRecord]:
    """A definition's occurrences not yet started: ``scheduled``, starting after ``now``, live
    (not rehearsals) and of the schedule (not manual). What a new version re-points."""
    query = (
        sa.select(runs)
        .where(
            runs.c.definition_id == definition_id,
            runs.c.status == RunStatus.SCHEDULED,
            runs.c.scheduled_for > now,
            runs.c.rehearsal.is_(False),
            runs.c.occurrence_at.is_not(None),
        )
        .order_by(runs.c.scheduled_for, runs.c.id)
    )
    return [RunRecord.from_row(row) for row in (await conn.execute(query)).mappings().all()]


async def repoint(
    conn: AsyncConnection,
    run_id: int,
    version_id: int,
    concurrency_key: str | None,
    wake_at: dt.datetime,
    now: dt.datetime,
) -> bool:
    """A scheduled run follows a new version: its version, its key and its wake (a nudge, so a
    reminder visit under way cannot write back the wake it worked out from the old version)."""
    result = await conn.execute(
        sa.update(runs)
        .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED)
        .values(
            version_id=version_id,
            concurrency_key=concurrency_key,
            wake_at=wake_at,
            nudges=runs.c.nudges + 1,
            updated_at=now,
        )
    )
    return result.rowcount == 1
