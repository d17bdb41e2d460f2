"""Ending a run: one rule for every way a run stops for good before it completes.

Missed (the tick), failed by ``on_failure: abort_run`` (the tick) and cancelled (a human) all do
the same three things in one transaction: the guarded move to the terminal status, cancelling
what the run still waits on (pending steps and parked cues, never a leased step: nothing can
recall a command already sent), and one ``run.status`` line saying so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.sql import run_log
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql


async def end_run(
    conn: AsyncConnection,
    run_id: int,
    from_statuses: str | Iterable[str],
    to: str,
    now: dt.datetime,
    *,
    error: str,
    detail: dict[str, Any],
    actor: str | None = None,
    step_id: int | None = None,
) -> int | None:
    """Steps cancelled, or ``None`` when the run was no longer in ``from_statuses``."""
    if not await runs_sql.transition(conn, run_id, from_statuses, to, now, error=error):
        return None
    cancelled = await steps_sql.cancel_open(conn, run_id, now)
    await run_log.write(
        conn,
        run_id,
        "run.status",
        now,
        actor=actor,
        step_id=step_id,
        detail={**detail, "to": to, "steps_cancelled": cancelled},
    )
    return cancelled
