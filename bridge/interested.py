"""Which runs have the members who marked their Discord scheduled event "Interested" imported as
sign-ups (``signup.interested``), and until when. No Discord here: the bot's loop
(``bot.cogs.signups._import``) polls each one's Interested list and hands every member to
``runner.signups.import_interested``, which decides as a click would.

A run is polled while it is scheduled, its listing has a Discord event that is still scheduled
(one deleted in Discord, skipped or over is not asked about), its version's sign-up names
``interested``, and its sign-ups have not closed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.sql import listings as sql
from runner.catalog import VersionCache
from runner.errors import UnreadableDefinition


@dataclass(frozen=True)
class InterestedImport:
    run_id: int
    # The Discord scheduled event mirrored for the run.
    event_id: int
    # The option Interested members are signed up to.
    option: str
    closes_at: dt.datetime
    # The sign-up takes only some roles: each member's roles must come with the list.
    needs_roles: bool


async def imports_due(
    engine: AsyncEngine, versions: VersionCache, now: dt.datetime
) -> list[InterestedImport]:
    """Every run whose Interested list is imported now (``now``: naive UTC)."""
    due: list[InterestedImport] = []
    async with engine.connect() as conn:
        rows = await sql.scheduled_with_event(conn)
        for row in rows:
            try:
                signup = (await versions.get(conn, int(row["version_id"]))).signup
            except UnreadableDefinition:
                continue  # the runner leaves such a run alone (its staff are told); so does this
            if signup is None or signup.interested is None:
                continue
            closes_at = row["scheduled_for"] - dt.timedelta(seconds=signup.closes_before_start())
            if now >= closes_at:
                continue
            due.append(
                InterestedImport(
                    run_id=int(row["run_id"]),
                    event_id=int(row["external_id"]),
                    option=signup.interested,
                    closes_at=closes_at,
                    needs_roles=bool(signup.roles),
                )
            )
    return due


async def event_gone(engine: AsyncEngine, target: InterestedImport, now: dt.datetime) -> bool:
    """The run's Discord event was deleted: its import stops for good (in the database, so a
    restart or the other process does not ask again). True the first time it is marked."""
    async with engine.begin() as conn:
        return await sql.event_gone(conn, target.run_id, str(target.event_id), now)
