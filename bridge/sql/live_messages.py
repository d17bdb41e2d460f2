"""Statements on ``event_run_live_messages``: the live message following each run in the staff
channel.

Who posts a run's message is decided by compare-and-set on its row, as a listing's push is: the
INSERT of a new row (its primary key is the run id) or an UPDATE that takes an unposted row whose
claim is free or expired, moving ``claim_expires_at`` in its SET so that under MariaDB's
matched-rows count the loser of a race matches nothing. Edits of a posted message take no claim:
only the process that can see the staff channel edits, and an edit repeated is harmless.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge.sql.posted_once import claim_first_post
from runner.schema import live_messages, runs, signups
from runner.states import RUN_HOLDS_KEY, RunStatus, SignupStatus

Row = sa.RowMapping


async def claim_new(
    conn: AsyncConnection, run_id: int, channel_id: str, owner: str, until: dt.datetime, now: dt.datetime
) -> bool:
    """Create the live-message row of ``run_id``, claimed for its first post; False when it
    exists already (another process posts it, or did)."""
    return await claim_first_post(conn, live_messages, run_id, channel_id, owner, until, now)


async def claim_unposted(
    conn: AsyncConnection, run_id: int, owner: str, until: dt.datetime, now: dt.datetime
) -> Row | None:
    """Take an open row that has no message (never posted, a post that died half-way, or a
    message someone deleted) when nobody holds it; answers the row as it was, or None."""
    free = sa.or_(live_messages.c.claim_expires_at.is_(None), live_messages.c.claim_expires_at <= now)
    unposted = sa.and_(live_messages.c.message_id.is_(None), live_messages.c.closed.is_(sa.false()))
    query = sa.select(live_messages).where(live_messages.c.run_id == run_id, free, unposted)
    before = (await conn.execute(query)).mappings().first()
    if before is None:
        return None
    expected = (
        live_messages.c.claim_expires_at.is_(None)
        if before["claim_expires_at"] is None
        else live_messages.c.claim_expires_at == before["claim_expires_at"]
    )
    result = await conn.execute(
        sa.update(live_messages)
        .where(live_messages.c.run_id == run_id, expected, unposted)
        .values(claimed_by=owner, claim_expires_at=until, updated_at=now)
    )
    return before if result.rowcount == 1 else None


async def store_posted(
    conn: AsyncConnection,
    run_id: int,
    owner: str,
    *,
    message_id: str,
    digest: str,
    closed: bool,
    now: dt.datetime,
) -> bool:
    """Keep the id of the message just posted (the next post gets a new nonce) and let the claim
    go; False if the claim was lost meanwhile."""
    result = await conn.execute(
        sa.update(live_messages)
        .where(live_messages.c.run_id == run_id, live_messages.c.claimed_by == owner)
        .values(
            message_id=message_id,
            posts=live_messages.c.posts + 1,
            digest=digest,
            closed=closed,
            claimed_by=None,
            claim_expires_at=None,
            updated_at=now,
        )
    )
    return result.rowcount == 1


async def release(
    conn: AsyncConnection, run_id: int, owner: str, retry_at: dt.datetime, now: dt.datetime
) -> None:
    """A post failed: hold the row as a back-off until ``retry_at`` (then anyone may post it)."""
    await conn.execute(
        sa.update(live_messages)
        .where(live_messages.c.run_id == run_id, live_messages.c.claimed_by == owner)
        .values(claimed_by=None, claim_expires_at=retry_at, updated_at=now)
    )


async def store_edit(
    conn: AsyncConnection, run_id: int, message_id: str, *, digest: str, closed: bool, now: dt.datetime
) -> None:
    """The edit Discord accepted (only if the row still names that message)."""
    await conn.execute(
        sa.update(live_messages)
        .where(live_messages.c.run_id == run_id, live_messages.c.message_id == message_id)
        .values(digest=digest, closed=closed, updated_at=now)
    )


async def forget_message(conn: AsyncConnection, run_id: int, message_id: str, now: dt.datetime) -> None:
    """The message is gone from Discord (deleted by someone): the next pass posts a new one."""
    await conn.execute(
        sa.update(live_messages)
        .where(live_messages.c.run_id == run_id, live_messages.c.message_id == message_id)
        .values(message_id=None, digest=None, claimed_by=None, claim_expires_at=None, updated_at=now)
    )


async def close(conn: AsyncConnection, run_id: int, now: dt.datetime) -> None:
    """Never look at this run's message again (its end is shown, or it can no longer be)."""
    await conn.execute(
        sa.update(live_messages)
        .where(live_messages.c.run_id == run_id)
        .values(closed=True, claimed_by=None, claim_expires_at=None, updated_at=now)
    )


async def get(conn: AsyncConnection, run_id: int) -> Row | None:
    query = sa.select(live_messages).where(live_messages.c.run_id == run_id)
    return (await conn.execute(query)).mappings().first()


async def posted(conn: AsyncConnection, run_id: int) -> Row | None:
    """The channel and message of a run's live message, if one is posted."""
    query = sa.select(live_messages.c.channel_id, live_messages.c.message_id).where(
        live_messages.c.run_id == run_id, live_messages.c.message_id.is_not(None)
    )
    return (await conn.execute(query)).mappings().first()


async def open_run_ids(conn: AsyncConnection, limit: int = 1000) -> list[int]:
    """Every run whose message has not shown its end yet (the start-up reconcile)."""
    query = (
        sa.select(live_messages.c.run_id)
        .where(live_messages.c.closed.is_(sa.false()))
        .order_by(live_messages.c.run_id)
        .limit(limit)
    )
    return [int(r) for r in (await conn.execute(query)).scalars().all()]


async def unfollowed_in_flight(conn: AsyncConnection, limit: int) -> list[int]:
    """Runs past ``scheduled`` and not ended that have no live message row (started while no
    process followed them), oldest first."""
    moving = sorted(status.value for status in RUN_HOLDS_KEY)
    query = (
        sa.select(runs.c.id)
        .where(runs.c.status.in_(moving), ~sa.exists().where(live_messages.c.run_id == runs.c.id))
        .order_by(runs.c.id)
        .limit(limit)
    )
    return [int(r) for r in (await conn.execute(query)).scalars().all()]


async def signup_counts_of_open(conn: AsyncConnection) -> Sequence[Row]:
    """How many are signed up (and waiting) per option, for each run whose message is open:
    what a live message shows of its sign-ups, read once a pass so a click is seen however
    many processes answer clicks (a join or a leave writes no run-log line)."""
    query = (
        sa.select(signups.c.run_id, signups.c.option, signups.c.status, sa.func.count().label("n"))
        .join(live_messages, live_messages.c.run_id == signups.c.run_id)
        .where(live_messages.c.closed.is_(sa.false()), signups.c.status != SignupStatus.CANCELLED.value)
        .group_by(signups.c.run_id, signups.c.option, signups.c.status)
    )
    return (await conn.execute(query)).mappings().all()


async def count_open(conn: AsyncConnection) -> int:
    query = sa.select(sa.func.count()).where(live_messages.c.closed.is_(sa.false()))
    return int((await conn.execute(query)).scalar() or 0)


async def run_ids_with_row(conn: AsyncConnection, run_ids: Sequence[int]) -> set[int]:
    if not run_ids:
        return set()
    query = sa.select(live_messages.c.run_id).where(live_messages.c.run_id.in_(list(run_ids)))
    return {int(r) for r in (await conn.execute(query)).scalars().all()}


async def followable(conn: AsyncConnection, run_id: int) -> bool:
    """Whether a run with no live message should get one: it has left ``scheduled`` (started,
    even if it has ended since), or it is scheduled and blocked by another run's key. One
    indexed read, so the runs a schedule materialises ahead cost no render."""
    query = sa.select(sa.literal(1)).where(
        runs.c.id == run_id,
        sa.or_(
            runs.c.started_at.is_not(None),
            sa.and_(runs.c.status == RunStatus.SCHEDULED.value, runs.c.blocked_by.is_not(None)),
        ),
    )
    return (await conn.execute(query)).first() is not None
