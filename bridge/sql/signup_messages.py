"""Statements on what the front end posts about sign-ups: ``event_signup_messages`` (the
run's sign-up message, claimed before it is posted so two processes post one) and the
delivery side of ``event_signup_notices`` (a promotion's notice row is written by
``runner.sql.signups.add_notice`` in the promotion's own transaction; here it is claimed and
settled by whoever delivers it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge.sql.posted_once import claim_first_post
from runner.schema import runs, signup_messages, signup_notices
from runner.states import RUN_IN_FLIGHT

Row = sa.RowMapping


async def open_notices(conn: AsyncConnection, now: dt.datetime, limit: int) -> Sequence[Row]:
    """Undelivered notices nobody holds a live lease on, oldest first."""
    query = (
        sa.select(signup_notices)
        .where(
            signup_notices.c.delivered_at.is_(None),
            sa.or_(signup_notices.c.lease_until.is_(None), signup_notices.c.lease_until <= now),
        )
        .order_by(signup_notices.c.id)
        .limit(limit)
    )
    return (await conn.execute(query)).mappings().all()


async def claim_notice(
    conn: AsyncConnection, notice_id: int, owner: str, now: dt.datetime, until: dt.datetime
) -> bool:
    """Compare-and-set on the lease: moves ``lease_until`` forward past ``now``, so a second
    claimer in the same instant matches nothing."""
    result = await conn.execute(
        sa.update(signup_notices)
        .where(
            signup_notices.c.id == notice_id,
            signup_notices.c.delivered_at.is_(None),
            sa.or_(signup_notices.c.lease_until.is_(None), signup_notices.c.lease_until <= now),
        )
        .values(claimed_by=owner, lease_until=until, attempts=signup_notices.c.attempts + 1)
    )
    return result.rowcount == 1


async def settle_notice(
    conn: AsyncConnection,
    notice_id: int,
    owner: str,
    now: dt.datetime,
    *,
    via: str | None,
    error: str | None,
    retry_at: dt.datetime | None = None,
) -> bool:
    """Delivered (``via``), or not this time (``error``, tried again after ``retry_at``); only
    by the lease's holder."""
    values: dict[str, Any] = {"last_error": error[:500] if error else None}
    if via is not None:
        values.update(delivered_at=now, delivered_via=via)
    else:
        values.update(lease_until=retry_at or now)
    result = await conn.execute(
        sa.update(signup_notices)
        .where(
            signup_notices.c.id == notice_id,
            signup_notices.c.claimed_by == owner,
            signup_notices.c.delivered_at.is_(None),
        )
        .values(**values)
    )
    return result.rowcount == 1


async def notices_for_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(signup_notices).where(signup_notices.c.run_id == run_id).order_by(signup_notices.c.id)
    return (await conn.execute(query)).mappings().all()


async def message_of(conn: AsyncConnection, run_id: int) -> Row | None:
    query = sa.select(signup_messages).where(signup_messages.c.run_id == run_id)
    return (await conn.execute(query)).mappings().first()


async def runs_without_message(conn: AsyncConnection, after_run_id: int, limit: int) -> Sequence[Row]:
    """Runs in flight, with an id past ``after_run_id``, that have no sign-up message row."""
    query = (
        sa.select(runs.c.id, runs.c.version_id, runs.c.scheduled_for)
        .outerjoin(signup_messages, signup_messages.c.run_id == runs.c.id)
        .where(
            runs.c.id > after_run_id,
            signup_messages.c.run_id.is_(None),
            runs.c.status.in_([s.value for s in RUN_IN_FLIGHT]),
        )
        .order_by(runs.c.id)
        .limit(limit)
    )
    return (await conn.execute(query)).mappings().all()


async def claim_message(
    conn: AsyncConnection, run_id: int, channel_id: str, owner: str, now: dt.datetime, until: dt.datetime
) -> bool:
    """The row written before the post: ``False`` when another process wrote it first."""
    return await claim_first_post(conn, signup_messages, run_id, channel_id, owner, until, now)


async def reclaim_unposted(
    conn: AsyncConnection, run_id: int, owner: str, now: dt.datetime, until: dt.datetime
) -> bool:
    """A row whose poster died before storing the message id, once its claim ran out: moves the
    claim's expiry forward, so one claimer wins."""
    result = await conn.execute(
        sa.update(signup_messages)
        .where(
            signup_messages.c.run_id == run_id,
            signup_messages.c.message_id.is_(None),
            signup_messages.c.claim_expires_at <= now,
        )
        .values(claimed_by=owner, claim_expires_at=until, updated_at=now)
    )
    return result.rowcount == 1


async def take_over_unposted(
    conn: AsyncConnection, run_id: int, claimer: str, now: dt.datetime, until: dt.datetime
) -> bool:
    """A row with no message yet that ``claimer`` itself claimed (a retry of the step that
    died mid-post), or whose claim ran out: claimed for ``claimer``, by one claimer only (the
    booking's ``reclaim_unposted`` moves the same columns)."""
    result = await conn.execute(
        sa.update(signup_messages)
        .where(
            signup_messages.c.run_id == run_id,
            signup_messages.c.message_id.is_(None),
            sa.or_(signup_messages.c.claimed_by == claimer, signup_messages.c.claim_expires_at <= now),
        )
        .values(claimed_by=claimer, claim_expires_at=until, updated_at=now)
    )
    return result.rowcount == 1


async def unposted_messages(conn: AsyncConnection, now: dt.datetime) -> Sequence[Row]:
    query = sa.select(signup_messages).where(
        signup_messages.c.message_id.is_(None), signup_messages.c.claim_expires_at <= now
    )
    return (await conn.execute(query)).mappings().all()


async def message_posted(
    conn: AsyncConnection, run_id: int, message_id: str, digest: str, now: dt.datetime
) -> None:
    await conn.execute(
        sa.update(signup_messages)
        .where(signup_messages.c.run_id == run_id)
        .values(message_id=message_id, digest=digest, shown_at=now, updated_at=now)
    )


async def message_shown(
    conn: AsyncConnection, run_id: int, digest: str, now: dt.datetime, *, closed: bool
) -> None:
    await conn.execute(
        sa.update(signup_messages)
        .where(signup_messages.c.run_id == run_id)
        .values(digest=digest, shown_at=now, closed=closed, updated_at=now)
    )


async def open_messages(conn: AsyncConnection) -> Sequence[Row]:
    query = sa.select(signup_messages).where(
        signup_messages.c.closed.is_(False), signup_messages.c.message_id.is_not(None)
    )
    return (await conn.execute(query)).mappings().all()
