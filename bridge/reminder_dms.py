"""Reminders sent by direct message (``to: attendees``), decided in the database.

* **Written once.** When the reminder falls due its action asks the delivery to DM the run's
  seated members; the bot writes one row per member (``queue``), leaving out those who turned
  reminders off. A unique key on (run, reminder, member) makes a second write nothing, so a
  reminder performed again (its step retried after a crash, or performed by another process)
  never makes a second DM.
* **Sent once.** The loop that sends them claims each row for ``LEASE_SECONDS`` first (a
  compare-and-set, so two processes never both hold it), sends, and settles it. A process that
  dies between the claim and the send leaves the row to the next claimer once the lease is over,
  which sends it with the same nonce (``nonce``), so Discord answers a repeat of a DM that did go
  out with the message already sent.
* **Never after the start.** A row whose run started (or ended) before it could be sent is
  dropped, as a channel reminder is skipped at the start: "starts in 10 minutes" never comes
  after it. A failed send is tried again after ``RETRY_SECONDS``, at most ``MAX_ATTEMPTS`` times.

No Discord here: member ids are strings, a DM is a row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.sql import reminder_dms as sql
from runner.bus import Event
from runner.states import DmGivenUp, RunStatus


@dataclass(frozen=True)
class AttendeeDmsQueued(Event):
    """A reminder's DMs were written to be sent: the sending loop passes now, rather than at its
    interval (which is how it finds what another process wrote, and what waits for a retry)."""

    run_id: int


LEASE_SECONDS = 30.0
RETRY_SECONDS = 60.0
MAX_ATTEMPTS = 3
DROPPED = DmGivenUp.DROPPED
FAILED = DmGivenUp.FAILED
STARTED_NOTE = "not sent before the event started"
OFF_NOTE = "the member turned reminders off"


@dataclass(frozen=True)
class ReminderDm:
    id: int
    run_id: int
    seq: int
    member_id: str
    content: str
    # This claim's attempt (1 for the first).
    attempts: int


def nonce(dm: ReminderDm) -> str:
    """The DM's nonce: the same for every attempt, so Discord answers a repeat with the first."""
    return f"remdm{dm.id}"[:25]


async def queue(
    engine: AsyncEngine,
    run_id: int,
    seq: int,
    step_id: int,
    members: Sequence[str],
    content: str,
    now: dt.datetime,
) -> tuple[int, int]:
    """One row per member of ``members`` who did not turn reminders off (written once however
    often this is asked); answers (members it goes to, members left out)."""
    seated = list(dict.fromkeys(members))
    async with engine.begin() as conn:
        off = await sql.turned_off(conn, seated)
        reached = [member for member in seated if member not in off]
        for member in reached:
            await sql.write_once(
                conn,
                {
                    "run_id": run_id,
                    "seq": seq,
                    "step_id": step_id,
                    "member_id": member,
                    "content": content[:2000],
                    "created_at": now,
                },
            )
    return len(reached), len(off)


async def claim_due(
    engine: AsyncEngine, owner: str, now: dt.datetime, *, limit: int = 20
) -> list[ReminderDm]:
    """Rows to send now, each claimed by ``owner`` for ``LEASE_SECONDS``; rows whose run is no
    longer waiting for its start, or whose member turned reminders off since, are dropped on the
    way (claimed, then settled ``dropped``)."""
    until = now + dt.timedelta(seconds=LEASE_SECONDS)
    async with engine.connect() as conn:
        candidates = await sql.open_rows(conn, now, limit)
        off = await sql.turned_off(conn, [str(row["member_id"]) for row in candidates])
    claimed: list[ReminderDm] = []
    for row in candidates:
        async with engine.begin() as conn:
            if not await sql.claim(conn, int(row["id"]), owner, now, until):
                continue
            started = row["run_status"] != RunStatus.SCHEDULED or row["scheduled_for"] <= now
            if started or row["member_id"] in off:
                note = STARTED_NOTE if started else OFF_NOTE
                await sql.settle(conn, int(row["id"]), owner, now, settled_as=DROPPED, error=note)
                continue
        claimed.append(
            ReminderDm(
                int(row["id"]),
                int(row["run_id"]),
                int(row["seq"]),
                str(row["member_id"]),
                str(row["content"]),
                int(row["attempts"]) + 1,
            )
        )
    return claimed


async def settle(
    engine: AsyncEngine,
    dm: ReminderDm,
    owner: str,
    now: dt.datetime,
    *,
    via: str | None = None,
    error: str | None = None,
) -> bool:
    """Sent ``via`` (``dm`` / ``mention``), or not (``error``): tried again after
    ``RETRY_SECONDS`` unless this was its last attempt (then ``failed``)."""
    settled_as = via or (FAILED if dm.attempts >= MAX_ATTEMPTS else None)
    async with engine.begin() as conn:
        return await sql.settle(
            conn,
            dm.id,
            owner,
            now,
            settled_as=settled_as,
            error=error,
            retry_at=now + dt.timedelta(seconds=RETRY_SECONDS),
        )


async def of_run(engine: AsyncEngine, run_id: int) -> list[dict[str, object]]:
    """Every DM row of the run (for tests and the curious)."""
    async with engine.connect() as conn:
        return [dict(row) for row in await sql.rows_of_run(conn, run_id)]


async def reminders_off(engine: AsyncEngine, member_id: str) -> bool:
    async with engine.connect() as conn:
        return await sql.reminders_off(conn, member_id)


async def turn_reminders(engine: AsyncEngine, member_id: str, *, on: bool, now: dt.datetime) -> None:
    """The member's own choice, from their next reminder on (a row not yet sent is dropped)."""
    async with engine.begin() as conn:
        await sql.set_reminders_off(conn, member_id, not on, now)
