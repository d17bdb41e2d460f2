"""Statements on ``event_run_listings``: the Discord scheduled event mirrored for each run.

Who pushes a listing is decided by compare-and-set on its row, as a run's lease is: the INSERT of
a new row (its primary key is the run id) or an UPDATE that takes an expired or free claim, and
moves ``claim_expires_at`` in its SET so that under MariaDB's matched-rows count the loser of a
race matches nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import LISTING_FINAL_STATUSES, listings, runs, versions
from runner.states import LISTING_LISTED, ListingStatus, RunStatus

Row = sa.RowMapping

# ``states.LISTING_LISTED`` in a fixed order: the listings that occupy one of Discord's 100 slots.
LISTED_STATUSES = tuple(sorted(LISTING_LISTED))


async def claim_new(
    conn: AsyncConnection, run_id: int, owner: str, until: dt.datetime, now: dt.datetime
) -> bool:
    """Create the listing row of ``run_id``, claimed; False when it exists already (another
    process listed it, or is listing it now)."""
    result = await conn.execute(
        insert_ignore(conn, listings).values(
            run_id=run_id,
            claimed_by=owner,
            claim_expires_at=until,
            attempts=1,
            created_at=now,
            updated_at=now,
        )
    )
    return result.rowcount == 1


async def claim(
    conn: AsyncConnection, run_id: int, owner: str, until: dt.datetime, now: dt.datetime
) -> Row | None:
    """Take the listing of ``run_id`` if nobody holds it (a free or expired claim) and it is not
    final; answers the row as it was before the claim, or None."""
    free = sa.or_(listings.c.claim_expires_at.is_(None), listings.c.claim_expires_at <= now)
    open_ = sa.or_(
        listings.c.pushed_status.is_(None), listings.c.pushed_status.not_in(LISTING_FINAL_STATUSES)
    )
    before = (
        (await conn.execute(sa.select(listings).where(listings.c.run_id == run_id, free, open_)))
        .mappings()
        .first()
    )
    if before is None:
        return None
    # The claim is valid only if the row is still as read: same expiry (or none) and holder.
    expected = (
        listings.c.claim_expires_at.is_(None)
        if before["claim_expires_at"] is None
        else listings.c.claim_expires_at == before["claim_expires_at"]
    )
    result = await conn.execute(
        sa.update(listings)
        .where(listings.c.run_id == run_id, expected, open_)
        .values(
            claimed_by=owner,
            claim_expires_at=until,
            attempts=listings.c.attempts + 1,
            updated_at=now,
        )
    )
    return before if result.rowcount == 1 else None


async def settle(
    conn: AsyncConnection,
    run_id: int,
    owner: str,
    *,
    external_id: str | None,
    pushed: str | None,
    pushed_status: str | None,
    now: dt.datetime,
) -> bool:
    """Store what Discord now shows and let the claim go; False if the claim was lost."""
    result = await conn.execute(
        sa.update(listings)
        .where(listings.c.run_id == run_id, listings.c.claimed_by == owner)
        .values(
            external_id=external_id,
            pushed=pushed,
            pushed_status=pushed_status,
            claimed_by=None,
            claim_expires_at=None,
            attempts=0,
            last_error=None,
            updated_at=now,
        )
    )
    return result.rowcount == 1


async def store_external_id(
    conn: AsyncConnection, run_id: int, owner: str, external_id: str, now: dt.datetime
) -> None:
    """Keep the id of an event just created at once, before anything else can fail."""
    await conn.execute(
        sa.update(listings)
        .where(listings.c.run_id == run_id, listings.c.claimed_by == owner)
        .values(external_id=external_id, updated_at=now)
    )


async def fail(
    conn: AsyncConnection, run_id: int, owner: str, error: str, retry_at: dt.datetime, now: dt.datetime
) -> None:
    """The push failed: keep the claim as a back-off until ``retry_at`` (then anyone retries)."""
    await conn.execute(
        sa.update(listings)
        .where(listings.c.run_id == run_id, listings.c.claimed_by == owner)
        .values(claimed_by=None, claim_expires_at=retry_at, last_error=error[:500], updated_at=now)
    )


async def unlisted_in_horizon(
    conn: AsyncConnection, after: dt.datetime | None, until: dt.datetime, limit: int
) -> Sequence[Row]:
    """Scheduled occurrences starting by ``until`` (and not before ``after``) with no listing yet,
    nearest first: the indexed range on ``(status, scheduled_for)``."""
    query = (
        sa.select(runs.c.id, runs.c.scheduled_for)
        .where(
            runs.c.status == RunStatus.SCHEDULED.value,
            runs.c.scheduled_for <= until,
            runs.c.rehearsal.is_(sa.false()),
            runs.c.occurrence_at.is_not(None),
            ~sa.exists().where(listings.c.run_id == runs.c.id),
        )
        .order_by(runs.c.scheduled_for, runs.c.id)
        .limit(limit)
    )
    if after is not None:
        query = query.where(runs.c.scheduled_for >= after)
    return (await conn.execute(query)).mappings().all()


async def count_listed(conn: AsyncConnection) -> int:
    """Listings that hold one of Discord's slots, or are about to (created, not answered yet)."""
    query = sa.select(sa.func.count()).where(
        sa.or_(listings.c.pushed_status.is_(None), listings.c.pushed_status.in_(LISTED_STATUSES))
    )
    return int((await conn.execute(query)).scalar() or 0)


async def open_run_ids(conn: AsyncConnection) -> list[int]:
    """Every listing not in a final pushed state (the start-up reconcile)."""
    query = sa.select(listings.c.run_id).where(
        sa.or_(listings.c.pushed_status.is_(None), listings.c.pushed_status.not_in(LISTING_FINAL_STATUSES))
    )
    return [int(r) for r in (await conn.execute(query)).scalars().all()]


async def retry_due(conn: AsyncConnection, now: dt.datetime, limit: int = 100) -> list[int]:
    """Listings whose claim ran out: a failed push whose back-off is over, or a push whose
    process died (a settled listing holds no expiry)."""
    query = (
        sa.select(listings.c.run_id)
        .where(listings.c.claim_expires_at <= now)
        .order_by(listings.c.claim_expires_at)
        .limit(limit)
    )
    return [int(r) for r in (await conn.execute(query)).scalars().all()]


async def latest_version_id(conn: AsyncConnection) -> int:
    """The newest published version: when it grows, runs may have been re-pointed at new text."""
    return int((await conn.execute(sa.select(sa.func.coalesce(sa.func.max(versions.c.id), 0)))).scalar() or 0)


async def with_listing(conn: AsyncConnection, run_ids: Iterable[int]) -> set[int]:
    ids = list(run_ids)
    if not ids:
        return set()
    query = sa.select(listings.c.run_id).where(listings.c.run_id.in_(ids))
    return {int(r) for r in (await conn.execute(query)).scalars().all()}


async def get(conn: AsyncConnection, run_id: int) -> Row | None:
    return (await conn.execute(sa.select(listings).where(listings.c.run_id == run_id))).mappings().first()


async def run_row(conn: AsyncConnection, run_id: int) -> Row | None:
    query = sa.select(
        runs.c.id,
        runs.c.definition_id,
        runs.c.version_id,
        runs.c.scope,
        runs.c.status,
        runs.c.scheduled_for,
        runs.c.occurrence_at,
        runs.c.rehearsal,
    ).where(runs.c.id == run_id)
    return (await conn.execute(query)).mappings().first()


async def scheduled_with_event(conn: AsyncConnection) -> Sequence[Row]:
    """Scheduled runs whose Discord event exists and is still scheduled: its id, and the run's
    version and start (the sign-up import polls their Interested lists). Discord holds at most
    100 listed events per guild, so this is at most about that many rows."""
    query = (
        sa.select(listings.c.run_id, listings.c.external_id, runs.c.version_id, runs.c.scheduled_for)
        .join(runs, runs.c.id == listings.c.run_id)
        .where(
            runs.c.status == RunStatus.SCHEDULED.value,
            listings.c.external_id.is_not(None),
            listings.c.pushed_status == ListingStatus.SCHEDULED.value,
        )
        .order_by(listings.c.run_id)
    )
    return (await conn.execute(query)).mappings().all()


async def event_gone(conn: AsyncConnection, run_id: int, external_id: str, now: dt.datetime) -> bool:
    """Discord answered that the run's event no longer exists (deleted by hand): the listing is
    gone, as the mirror would settle it, so neither the mirror nor the Interested import asks
    about it again; False when it was already marked."""
    result = await conn.execute(
        sa.update(listings)
        .where(
            listings.c.run_id == run_id,
            listings.c.external_id == external_id,
            listings.c.pushed_status == ListingStatus.SCHEDULED.value,
        )
        .values(pushed_status=ListingStatus.GONE.value, updated_at=now)
    )
    return result.rowcount == 1
