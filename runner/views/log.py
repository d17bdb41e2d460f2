"""The run log as front ends read it: a run's history, and the feed of lines written since an id."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import history
from runner.sql import run_log


async def log_for_run(engine: AsyncEngine, run_id: int) -> Sequence[history.Entry]:
    """A run's history, oldest first, as typed entries (the one reader, ``runner.history``)."""
    async with engine.connect() as conn:
        return await history.entries_for_run(conn, run_id)


async def latest_log_id(engine: AsyncEngine) -> int:
    """Where a reader of the run log starts when it only wants what happens from now on."""
    async with engine.connect() as conn:
        return await run_log.latest_id(conn)


async def log_after(engine: AsyncEngine, last_id: int, *, limit: int = 100) -> Sequence[history.Entry]:
    """Run-log lines written after ``last_id``, oldest first (the staff-log poster's feed)."""
    async with engine.connect() as conn:
        return await history.entries_after(conn, last_id, limit)
