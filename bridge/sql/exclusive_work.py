"""Statements on ``event_external_claims`` and ``event_work_leases``: what makes several
processes on one database do a piece of work once, not once each.

* **A claim** is for one external event that every process receives (a front end's id for it).
  It is an ``INSERT IGNORE`` on the id, the primary key: the one insert that adds the row is the
  process that handles the event; every other is told 0 rows. The caller commits before acting
  (on Galera the loser of a race between two nodes learns it only at ``COMMIT``).
* **A work lease** is for a piece of work that runs all the time and only one process may do.
  Taking it is an ``INSERT IGNORE`` of its row, or an ``UPDATE`` whose ``WHERE`` says "mine, or
  expired" and whose ``SET`` moves ``lease_until`` and ``owner``, the columns it guards on: the
  loser of two processes taking an expired lease together re-reads a row that is neither, and
  matches nothing even under MariaDB's matched-rows count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import external_claims, work_leases

Row = sa.RowMapping


async def claim_external(conn: AsyncConnection, external_id: str, owner: str, now: dt.datetime) -> bool:
    """Take the event ``external_id`` for ``owner``; False when another process has it."""
    result = await conn.execute(
        insert_ignore(conn, external_claims).values(external_id=external_id, claimed_by=owner, claimed_at=now)
    )
    return result.rowcount == 1


async def claimant(conn: AsyncConnection, external_id: str) -> str | None:
    """The process that took ``external_id``, if any did."""
    query = sa.select(external_claims.c.claimed_by).where(external_claims.c.external_id == external_id)
    return (await conn.execute(query)).scalar()


async def prune_claims(conn: AsyncConnection, before: dt.datetime) -> int:
    """Forget the claims taken before ``before`` (their events can no longer come again)."""
    result = await conn.execute(sa.delete(external_claims).where(external_claims.c.claimed_at < before))
    return int(result.rowcount or 0)


async def lease_row(conn: AsyncConnection, name: str) -> Row | None:
    query = sa.select(work_leases).where(work_leases.c.name == name)
    return (await conn.execute(query)).mappings().first()


async def take_lease(
    conn: AsyncConnection, name: str, owner: str, until: dt.datetime, now: dt.datetime
) -> Row | None:
    """Hold the lease ``name`` until ``until``: create it, renew it if ``owner`` holds it, or take
    it over if it expired (``lease_until`` at or before ``now``). Answers the row as it was
    before (None when it was just created), or raises ``LeaseHeld`` when another process holds
    it; the caller reads the previous holder's position from the row."""
    before = await lease_row(conn, name)
    if before is None:
        created = await conn.execute(
            insert_ignore(conn, work_leases).values(name=name, owner=owner, lease_until=until, updated_at=now)
        )
        if created.rowcount == 1:
            return None
        before = await lease_row(conn, name)
        assert before is not None
    if before["owner"] != owner and before["lease_until"] > now:
        raise LeaseHeld(before["owner"])
    # ``until`` is after ``now``, so the loser of a race sees a row that is neither its own nor
    # expired; the owner check stops a renewal from taking a lease another process took over.
    mine_or_expired = sa.or_(work_leases.c.owner == owner, work_leases.c.lease_until <= now)
    result = await conn.execute(
        sa.update(work_leases)
        .where(work_leases.c.name == name, mine_or_expired)
        .values(owner=owner, lease_until=until, updated_at=now)
    )
    if result.rowcount != 1:
        raise LeaseHeld(None)
    return before


async def save_position(
    conn: AsyncConnection,
    name: str,
    owner: str,
    position: int | None,
    done: Sequence[int],
    until: dt.datetime,
    now: dt.datetime,
) -> bool:
    """Record where the holder got to, and renew the lease; False when ``owner`` no longer holds
    it (another process took it over: the holder must stop)."""
    result = await conn.execute(
        sa.update(work_leases)
        .where(work_leases.c.name == name, work_leases.c.owner == owner)
        .values(position=position, done=list(done) or None, lease_until=until, updated_at=now)
    )
    return result.rowcount == 1


async def give_back(conn: AsyncConnection, name: str, owner: str, now: dt.datetime) -> bool:
    """End ``owner``'s lease at once, so another process takes the work at its next pass."""
    result = await conn.execute(
        sa.update(work_leases)
        .where(work_leases.c.name == name, work_leases.c.owner == owner)
        .values(owner=None, lease_until=now, updated_at=now)
    )
    return result.rowcount == 1


class LeaseHeld(Exception):
    """Another process holds the lease (``holder``, when known)."""

    def __init__(self, holder: str | None) -> None:
        super().__init__(holder)
        self.holder = holder
