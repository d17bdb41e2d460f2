"""Statements on ``event_runs``: creating a run, reading one (or a list), and moving its status.

Who holds a run and when it next wakes is ``run_leases``; the occurrences a definition's
schedule has created are ``run_occurrences``. A status move is a compare-and-set whose WHERE
carries the statuses it expects, so that under MariaDB's matched-rows count
(``CLIENT_FOUND_ROWS``) the loser of a race is told 0; the one deliberate exception is
``transition(running -> running)``, where "still running" is the answer wanted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.records import RunRecord
from runner.schema import definitions, runs
from runner.sql.run_concurrency import wake_waiters as wake_blocked
from runner.states import RUN_IN_FLIGHT, RUN_TERMINAL, Health, RunStatus

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
    occurrence_at: dt.datetime | None = None,
) -> int | None:
    """Create one occurrence; ``occurrence_at``: the schedule's moment it stands for when it
    starts at another (a moved date), so the moved occurrence is still booked once. ``None`` when ``uq_evrun_occurrence`` already holds it. A
    ``manual`` run (started by hand) is no occurrence: it holds no key and never collides.
    ``wake_at``: its first wake when that comes before its start (its first reminder)."""
    result = await conn.execute(
        insert_ignore(conn, runs).values(
            definition_id=definition_id,
            version_id=version_id,
            scope=scope,
            scheduled_for=scheduled_for,
            occurrence_at=None if manual else (occurrence_at or scheduled_for),
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
        "health": Health.OK,
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
