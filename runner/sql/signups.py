"""Statements on the sign-up tables: ``event_signups``, ``event_signup_pools``,
``event_signup_notices``, ``event_signup_messages`` and ``event_signup_imports``
(``runner.signups`` composes them).

Who gets a seat is decided by the server: ``take_seat`` is an UPDATE guarded by
``taken < capacity`` whose row count (matched rows under CLIENT_FOUND_ROWS, and a match always
changes ``taken``) says yes or no, and the pool's CHECK refuses a count past its capacity even
to a statement that forgot the guard. Every join and leave of a run first locks the run's ``*``
pool row (``lock_run``), so within a run they are serialised by the database in the order it
granted that lock, which is also the click order the waiting list is served in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import runs, signup_imports, signup_messages, signup_notices, signup_pools, signups
from runner.states import RUN_IN_FLIGHT, SignupImport, SignupOverride, SignupStatus

Row = sa.RowMapping
OVERALL = "*"
PROMOTED = "promoted"


async def run_for_signup(conn: AsyncConnection, run_id: int) -> Row | None:
    """The run's status, start, the version it runs, and staff's override (``staff_override``)."""
    overall = signup_pools.alias("overall")
    joined = runs.outerjoin(overall, sa.and_(overall.c.run_id == runs.c.id, overall.c.pool == OVERALL))
    query = (
        sa.select(runs.c.id, runs.c.status, runs.c.scheduled_for, runs.c.version_id, overall.c.staff_override)
        .select_from(joined)
        .where(runs.c.id == run_id)
    )
    return (await conn.execute(query)).mappings().first()


async def set_override(conn: AsyncConnection, run_id: int, override: SignupOverride | None) -> bool:
    """Staff close (or reopen) the run's sign-ups; ``False``: it was so already. The caller
    holds the run's lock (``lock_run``)."""
    where = (signup_pools.c.run_id == run_id, signup_pools.c.pool == OVERALL)
    now = (await conn.execute(sa.select(signup_pools.c.staff_override).where(*where))).scalar_one_or_none()
    if now == override:
        return False
    await conn.execute(sa.update(signup_pools).where(*where).values(staff_override=override))
    return True


async def pools_exist(conn: AsyncConnection, run_id: int) -> bool:
    query = sa.select(signup_pools.c.pool).where(
        signup_pools.c.run_id == run_id, signup_pools.c.pool == OVERALL
    )
    return (await conn.execute(query)).first() is not None


async def create_pools(
    conn: AsyncConnection, run_id: int, overall: int | None, options: Iterable[tuple[str, int | None]]
) -> None:
    """The run's pools, once: a second call (another process's, at the same moment) does nothing."""
    rows = [{"run_id": run_id, "pool": OVERALL, "capacity": overall, "taken": 0, "clicks": 0}]
    rows += [
        {"run_id": run_id, "pool": name, "capacity": cap, "taken": 0, "clicks": 0} for name, cap in options
    ]
    await conn.execute(insert_ignore(conn, signup_pools), rows)


async def next_click(conn: AsyncConnection, run_id: int) -> int | None:
    """Lock the run's ``*`` pool and take its next click number (``None``: no pools yet)."""
    where = (signup_pools.c.run_id == run_id, signup_pools.c.pool == OVERALL)
    moved = await conn.execute(sa.update(signup_pools).where(*where).values(clicks=signup_pools.c.clicks + 1))
    if moved.rowcount != 1:
        return None
    return int((await conn.execute(sa.select(signup_pools.c.clicks).where(*where))).scalar_one())


async def next_clicks(conn: AsyncConnection, run_id: int, count: int) -> int | None:
    """Lock the run's ``*`` pool and take ``count`` click numbers at once; the first of them
    (``None``: no pools yet). A burst's presses (``join_many``) are numbered in one statement."""
    where = (signup_pools.c.run_id == run_id, signup_pools.c.pool == OVERALL)
    moved = await conn.execute(
        sa.update(signup_pools).where(*where).values(clicks=signup_pools.c.clicks + count)
    )
    if moved.rowcount != 1:
        return None
    last = int((await conn.execute(sa.select(signup_pools.c.clicks).where(*where))).scalar_one())
    return last - count + 1


async def lock_run(conn: AsyncConnection, run_id: int) -> bool:
    """Lock the run's ``*`` pool without taking a click (a leave); ``False``: no pools yet."""
    query = (
        sa.select(signup_pools.c.pool)
        .where(signup_pools.c.run_id == run_id, signup_pools.c.pool == OVERALL)
        .with_for_update()
    )
    return (await conn.execute(query)).first() is not None


def _has_room() -> sa.ColumnElement[bool]:
    return sa.or_(signup_pools.c.capacity.is_(None), signup_pools.c.taken < signup_pools.c.capacity)


async def take_seat(conn: AsyncConnection, run_id: int, pool: str) -> bool:
    """One seat of ``pool`` if it has one left: the server's answer."""
    result = await conn.execute(
        sa.update(signup_pools)
        .where(signup_pools.c.run_id == run_id, signup_pools.c.pool == pool, _has_room())
        .values(taken=signup_pools.c.taken + 1)
    )
    return result.rowcount == 1


async def free_seat(conn: AsyncConnection, run_id: int, pool: str) -> None:
    result = await conn.execute(
        sa.update(signup_pools)
        .where(signup_pools.c.run_id == run_id, signup_pools.c.pool == pool, signup_pools.c.taken > 0)
        .values(taken=signup_pools.c.taken - 1)
    )
    assert result.rowcount == 1, f"run {run_id}: freed a seat of {pool!r} that nobody held"


async def pools(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(signup_pools).where(signup_pools.c.run_id == run_id)
    return (await conn.execute(query)).mappings().all()


async def signup_of(conn: AsyncConnection, run_id: int, member_id: str) -> Row | None:
    query = sa.select(signups).where(signups.c.run_id == run_id, signups.c.member_id == member_id)
    return (await conn.execute(query)).mappings().first()


async def write_signup(
    conn: AsyncConnection,
    *,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    status: SignupStatus,
    position: int,
    now: dt.datetime,
    existed: bool,
) -> None:
    row = new_signup(
        run_id=run_id,
        member_id=member_id,
        member_name=member_name,
        option=option,
        status=status,
        position=position,
        now=now,
    )
    if existed:
        changed = {k: v for k, v in row.items() if k not in ("run_id", "member_id")}
        await conn.execute(
            sa.update(signups)
            .where(signups.c.run_id == run_id, signups.c.member_id == member_id)
            .values(**changed)
        )
    else:
        await conn.execute(sa.insert(signups).values(**row))


async def signups_of(conn: AsyncConnection, run_id: int, member_ids: Sequence[str]) -> dict[str, Row]:
    """The sign-ups of ``member_ids`` on the run, in one statement (a burst's, ``join_many``)."""
    if not member_ids:
        return {}
    query = sa.select(signups).where(
        signups.c.run_id == run_id, signups.c.member_id.in_(list(set(member_ids)))
    )
    return {str(row["member_id"]): row for row in (await conn.execute(query)).mappings()}


async def insert_signups(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """New sign-ups in one statement (a burst's, written after their seats were decided)."""
    if rows:
        await conn.execute(sa.insert(signups), list(rows))


def new_signup(
    *,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    status: SignupStatus,
    position: int,
    now: dt.datetime,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "member_id": member_id,
        "member_name": member_name[:100],
        "option": option,
        "status": status.value,
        "position": position,
        "joined_at": now,
        "updated_at": now,
    }


async def set_status(
    conn: AsyncConnection,
    run_id: int,
    member_id: str,
    *,
    from_: SignupStatus,
    to: SignupStatus,
    now: dt.datetime,
) -> bool:
    """Compare-and-set: moves ``status`` itself, so a loser matches nothing."""
    result = await conn.execute(
        sa.update(signups)
        .where(signups.c.run_id == run_id, signups.c.member_id == member_id, signups.c.status == from_.value)
        .values(status=to.value, updated_at=now)
    )
    return result.rowcount == 1


async def first_waitlisted_with_room(conn: AsyncConnection, run_id: int) -> Row | None:
    """The waitlisted member with the lowest position whose option has a seat free."""
    query = (
        sa.select(signups)
        .join(
            signup_pools,
            sa.and_(signup_pools.c.run_id == signups.c.run_id, signup_pools.c.pool == signups.c.option),
        )
        .where(signups.c.run_id == run_id, signups.c.status == SignupStatus.WAITLISTED.value, _has_room())
        .order_by(signups.c.position)
        .limit(1)
    )
    return (await conn.execute(query)).mappings().first()


async def waitlist_place(conn: AsyncConnection, run_id: int, option: str, position: int) -> int:
    """Where a waitlisted member of ``option`` stands in its waiting list (1: next)."""
    query = sa.select(sa.func.count()).where(
        signups.c.run_id == run_id,
        signups.c.option == option,
        signups.c.status == SignupStatus.WAITLISTED.value,
        signups.c.position <= position,
    )
    return int((await conn.execute(query)).scalar_one())


async def for_run(conn: AsyncConnection, run_id: int, *, with_cancelled: bool = False) -> Sequence[Row]:
    query = sa.select(signups).where(signups.c.run_id == run_id).order_by(signups.c.position)
    if not with_cancelled:
        query = query.where(signups.c.status != SignupStatus.CANCELLED.value)
    return (await conn.execute(query)).mappings().all()


async def counts_for_runs(conn: AsyncConnection, run_ids: Sequence[int]) -> Sequence[Row]:
    """(run_id, status, n) for every run asked about: the counts ``/event status`` shows."""
    if not run_ids:
        return []
    query = (
        sa.select(signups.c.run_id, signups.c.status, sa.func.count().label("n"))
        .where(signups.c.run_id.in_(list(run_ids)), signups.c.status != SignupStatus.CANCELLED.value)
        .group_by(signups.c.run_id, signups.c.status)
    )
    return (await conn.execute(query)).mappings().all()


# ── The notice outbox ────────────────────────────────────────────────────


async def add_notice(
    conn: AsyncConnection, run_id: int, member_id: str, option: str, seq: int, now: dt.datetime
) -> None:
    await conn.execute(
        sa.insert(signup_notices).values(
            run_id=run_id, member_id=member_id, kind=PROMOTED, seq=seq, option=option, created_at=now
        )
    )


# ── Imports from the Discord event's Interested list ─────────────────────


async def known_members(conn: AsyncConnection, run_id: int) -> set[str]:
    """Every member of ``run_id`` signed up (in any status, left too) or imported before: the
    import passes them by."""
    signed = sa.select(signups.c.member_id).where(signups.c.run_id == run_id)
    imported = sa.select(signup_imports.c.member_id).where(signup_imports.c.run_id == run_id)
    return {str(member) for member in (await conn.execute(sa.union(signed, imported))).scalars()}


async def was_imported(conn: AsyncConnection, run_id: int, member_id: str) -> bool:
    query = sa.select(signup_imports.c.member_id).where(
        signup_imports.c.run_id == run_id, signup_imports.c.member_id == member_id
    )
    return (await conn.execute(query)).first() is not None


async def record_import(
    conn: AsyncConnection, run_id: int, member_id: str, outcome: SignupImport, now: dt.datetime
) -> None:
    """Once per (run, member): a second record (a poll repeated after a crash) does nothing."""
    values = {"run_id": run_id, "member_id": member_id, "outcome": outcome.value, "imported_at": now}
    await conn.execute(insert_ignore(conn, signup_imports).values(**values))


async def imports_of(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = (
        sa.select(signup_imports)
        .where(signup_imports.c.run_id == run_id)
        .order_by(signup_imports.c.imported_at, signup_imports.c.member_id)
    )
    return (await conn.execute(query)).mappings().all()


# ── Members who left the server ──────────────────────────────────────────


async def signed_up_on_open_messages(conn: AsyncConnection) -> Sequence[Row]:
    """Every (run, member) still on a list whose sign-up message is open: the members a departure
    from the server could free a seat for."""
    query = (
        sa.select(signups.c.run_id, signups.c.member_id, signups.c.member_name)
        .join(signup_messages, signup_messages.c.run_id == signups.c.run_id)
        .where(signup_messages.c.closed.is_(False), signups.c.status != SignupStatus.CANCELLED.value)
        .order_by(signups.c.run_id, signups.c.position)
    )
    return (await conn.execute(query)).mappings().all()


async def runs_of_member(conn: AsyncConnection, member_id: str) -> list[int]:
    """The runs in flight whose list ``member_id`` is on."""
    query = (
        sa.select(signups.c.run_id)
        .join(runs, runs.c.id == signups.c.run_id)
        .where(
            signups.c.member_id == member_id,
            signups.c.status != SignupStatus.CANCELLED.value,
            runs.c.status.in_([s.value for s in RUN_IN_FLIGHT]),
        )
    )
    return [int(run_id) for run_id in (await conn.execute(query)).scalars()]


# ── A member's own sign-ups (``runner.views.players``) ───────────────────


async def member_runs(conn: AsyncConnection, member_id: str) -> Sequence[Row]:
    """The live runs in flight whose list ``member_id`` is on, soonest first: each run's id,
    scope, start, status and version (``/events mine``). Rehearsals are left out: their
    sign-ups are staff trying the event, not a player's plans."""
    query = (
        sa.select(runs.c.id, runs.c.scope, runs.c.scheduled_for, runs.c.status, runs.c.version_id)
        .join(signups, signups.c.run_id == runs.c.id)
        .where(
            signups.c.member_id == member_id,
            signups.c.status != SignupStatus.CANCELLED.value,
            runs.c.status.in_([s.value for s in RUN_IN_FLIGHT]),
            runs.c.rehearsal.is_(False),
        )
        .order_by(runs.c.scheduled_for, runs.c.id)
    )
    return (await conn.execute(query)).mappings().all()
