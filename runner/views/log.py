"""The run log as front ends read it: a run's history, and the feed of lines a follower has not
delivered yet (``runner.sql.run_log.LogFollower``: each line once, even one committed late)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import history
from runner.sql.run_log import LogFollower


async def log_for_run(engine: AsyncEngine, run_id: int) -> Sequence[history.Entry]:
    """A run's history, oldest first, as typed entries (the one reader, ``runner.history``)."""
    async with engine.connect() as conn:
        return await history.entries_for_run(conn, run_id)


async def follow_log_from_now(engine: AsyncEngine) -> LogFollower:
    """Where a reader of the run log starts when it only wants what happens from now on."""
    async with engine.connect() as conn:
        return await LogFollower.from_now(conn)


async def log_followed(
    engine: AsyncEngine, follower: LogFollower, *, limit: int = 100
) -> tuple[list[history.Entry], bool]:
    """The lines ``follower`` has not delivered yet, oldest first (the staff log's feed), and
    whether more are waiting; the reader says which it delivered (``follower.delivered``)."""
    async with engine.connect() as conn:
        return await history.entries_followed(conn, follower, limit)
