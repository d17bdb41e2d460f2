"""A run already booked follows its date moved by a new version (``runner.definitions.cron_dates``):
it keeps its id, so its sign-ups, its sign-up message and its Events-tab listing follow it, and
the staff log says so."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy.ext.asyncio import AsyncConnection

from runner import history
from runner.records import RunRecord
from runner.sql import run_occurrences


async def reschedule(
    conn: AsyncConnection,
    run: RunRecord,
    start: dt.datetime,
    number: int,
    now: dt.datetime,
    actor: history.Actor | None,
) -> RunRecord:
    """In the publishing transaction: ``run`` starts at ``start``; the record as it now is."""
    if not await run_occurrences.move_start(conn, run.id, start, now):
        return run
    moved = history.RunMoved(from_at=run.scheduled_for, to_at=start, version=number)
    await history.record(conn, run.id, moved, now, actor=actor)
    return dataclasses.replace(run, scheduled_for=start, wake_at=start)
