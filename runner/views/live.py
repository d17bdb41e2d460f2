"""A run's live message as the runner sees it, with no Discord in it: where the run is (phase *i*
of *n*, the current step), what it waits for and until when, the last thing a person did to it,
and where its steps posted (channel and message ids); and where its live message is.

The bot renders ``LiveView`` as the embed it keeps edited in the staff channel
(``bot.live_runs``); the staff log links a run's lines to ``live_message_of``.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.sql import live_messages as live_sql


async def live_message_of(engine: AsyncEngine, run_id: int) -> tuple[int, int] | None:
    """The staff channel and message id of the run's live message, or None while it has none
    (not posted yet, the switch is off, or someone deleted it and the new one is not up yet)."""
    async with engine.connect() as conn:
        row = await live_sql.posted(conn, run_id)
    if row is None:
        return None
    return int(row["channel_id"]), int(row["message_id"])
