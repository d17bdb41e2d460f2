"""What the front end posts about a run's sign-ups, decided in the database: the sign-up message
(one per run, claimed before it is posted so two processes, or the booking and a
``discord.signup`` step, post one; a claim whose poster died is taken over) and the promotion
notices (an outbox row written with the promotion, claimed for ``NOTICE_LEASE_SECONDS`` by the
deliverer and settled once). No Discord here: ids are strings, a post is a row.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.sql import signup_messages as sql
from runner import signup_runs
from runner.errors import UnreadableDefinition
from runner.sql import signups as signup_sql


@dataclass(frozen=True)
class Notice:
    id: int
    run_id: int
    member_id: str
    option: str
    kind: str
    attempts: int


NOTICE_LEASE_SECONDS = 30.0


async def claim_notices(
    engine: AsyncEngine, owner: str, now: dt.datetime, *, limit: int = 20
) -> list[Notice]:
    """Undelivered notices, each claimed by ``owner`` for ``NOTICE_LEASE_SECONDS`` (a process
    that dies holding one leaves it to the next claimer once the lease is over)."""
    until = now + dt.timedelta(seconds=NOTICE_LEASE_SECONDS)
    claimed: list[Notice] = []
    async with engine.connect() as conn:
        candidates = await sql.open_notices(conn, now, limit)
    for row in candidates:
        async with engine.begin() as conn:
            if not await sql.claim_notice(conn, int(row["id"]), owner, now, until):
                continue
        claimed.append(
            Notice(
                int(row["id"]),
                int(row["run_id"]),
                str(row["member_id"]),
                str(row["option"]),
                str(row["kind"]),
                int(row["attempts"]) + 1,
            )
        )
    return claimed


async def settle_notice(
    engine: AsyncEngine,
    notice: Notice,
    owner: str,
    now: dt.datetime,
    *,
    via: str | None = None,
    error: str | None = None,
    retry_in: float = 60.0,
) -> bool:
    """Delivered ``via`` (``dm`` / ``mention``), or failed with ``error`` (tried again later)."""
    async with engine.begin() as conn:
        return await sql.settle_notice(
            conn,
            notice.id,
            owner,
            now,
            via=via,
            error=error,
            retry_at=None if via else now + dt.timedelta(seconds=retry_in),
        )


@dataclass(frozen=True)
class SignupMessage:
    run_id: int
    channel_id: str
    message_id: str | None
    digest: str | None
    closed: bool


def _message(row: sql.Row) -> SignupMessage:
    return SignupMessage(
        int(row["run_id"]),
        str(row["channel_id"]),
        str(row["message_id"]) if row["message_id"] is not None else None,
        row["digest"],
        bool(row["closed"]),
    )


async def runs_to_announce(
    engine: AsyncEngine, after_run_id: int, now: dt.datetime, *, limit: int = 200
) -> tuple[list[tuple[int, str]], int]:
    """Runs in flight past ``after_run_id`` whose sign-up names a channel, that have no message
    yet and whose sign-ups are open by ``now`` (``signup.opens``, or at once): (run id, the
    channel as written); and the run id the next look may start after. That id stops before
    the first run whose sign-ups open later, so it is looked at again until they do."""
    found: list[tuple[int, str]] = []
    last = after_run_id
    waiting = False
    async with engine.connect() as conn:
        rows = await sql.runs_without_message(conn, after_run_id, limit)
        cache = signup_runs.versions_of(engine)
        for row in rows:
            try:
                signup = (await cache.get(conn, int(row["version_id"]))).signup
            except UnreadableDefinition:
                signup = None
            opens = None if signup is None or signup.opens is None else dt.timedelta(seconds=signup.opens)
            if opens is not None and row["scheduled_for"] - opens > now:
                waiting = True
                continue
            if not waiting:
                last = max(last, int(row["id"]))
            if signup is not None and signup.channel:
                found.append((int(row["id"]), signup.channel))
    return found, last


async def claim_message(
    engine: AsyncEngine, run_id: int, channel_id: str, owner: str, now: dt.datetime, *, seconds: float = 60.0
) -> bool:
    """Write the message's row before posting it: one process posts it."""
    async with engine.begin() as conn:
        return await sql.claim_message(
            conn, run_id, channel_id, owner, now, now + dt.timedelta(seconds=seconds)
        )


async def reclaim_unposted(
    engine: AsyncEngine, owner: str, now: dt.datetime, *, seconds: float = 60.0
) -> list[SignupMessage]:
    """Rows whose poster died before storing the message id, claimed again by ``owner``."""
    claimed = []
    async with engine.connect() as conn:
        rows = await sql.unposted_messages(conn, now)
    for row in rows:
        async with engine.begin() as conn:
            if await sql.reclaim_unposted(
                conn, int(row["run_id"]), owner, now, now + dt.timedelta(seconds=seconds)
            ):
                claimed.append(_message(row))
    return claimed


class StepClaim(enum.StrEnum):
    # The run has its message: nothing to post.
    POSTED = "posted"
    # The caller holds the row: it posts, where the row says.
    CLAIMED = "claimed"
    # Another poster holds a live claim (the booking, posting now): ask again later.
    BUSY = "busy"


async def claim_for_step(
    engine: AsyncEngine,
    run_id: int,
    channel_id: str,
    claimer: str,
    now: dt.datetime,
    *,
    seconds: float = 60.0,
) -> tuple[StepClaim, SignupMessage]:
    """A ``discord.signup`` step's turn at the run's one message. The row is written before the
    post, as the booking writes it (``claim_message``), so whichever writes it first posts; a
    retry of the same step (``claimer``) takes its own row back at once, to post again with the
    run's nonce (Discord answers a repeat with the message posted first)."""
    until = now + dt.timedelta(seconds=seconds)
    async with engine.begin() as conn:
        if await sql.claim_message(conn, run_id, channel_id, claimer, now, until):
            row = await sql.message_of(conn, run_id)
            assert row is not None
            return StepClaim.CLAIMED, _message(row)
    async with engine.begin() as conn:
        row = await sql.message_of(conn, run_id)
        assert row is not None, "a sign-up message row is never deleted while its run exists"
        if row["message_id"] is not None:
            return StepClaim.POSTED, _message(row)
        taken = await sql.take_over_unposted(conn, run_id, claimer, now, until)
        return (StepClaim.CLAIMED if taken else StepClaim.BUSY), _message(row)


async def message_posted(
    engine: AsyncEngine, run_id: int, message_id: str, digest: str, now: dt.datetime
) -> None:
    async with engine.begin() as conn:
        await sql.message_posted(conn, run_id, message_id, digest, now)


async def message_shown(
    engine: AsyncEngine, run_id: int, digest: str, now: dt.datetime, *, closed: bool
) -> None:
    async with engine.begin() as conn:
        await sql.message_shown(conn, run_id, digest, now, closed=closed)


async def open_messages(engine: AsyncEngine) -> list[SignupMessage]:
    async with engine.connect() as conn:
        return [_message(row) for row in await sql.open_messages(conn)]


async def message_of(engine: AsyncEngine, run_id: int) -> SignupMessage | None:
    async with engine.connect() as conn:
        row = await sql.message_of(conn, run_id)
    return _message(row) if row is not None else None


async def event_title(engine: AsyncEngine, run_id: int) -> str | None:
    """The run's event title, for the message's heading and the notices."""
    async with engine.connect() as conn:
        row = await signup_sql.run_for_signup(conn, run_id)
        if row is None:
            return None
        cache = signup_runs.versions_of(engine)
        try:
            return (await cache.get(conn, int(row["version_id"]))).title
        except UnreadableDefinition:
            return None
