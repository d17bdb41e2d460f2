"""The run log's one writer: ``record`` a typed line, or queue lines ``written_together``."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.history.events import Event
from runner.kinds import Actor
from runner.sql import run_log as run_log_sql


async def record(
    conn: AsyncConnection,
    run_id: int,
    event: Event,
    at: dt.datetime,
    *,
    step_id: int | None = None,
    actor: Actor | None = None,
) -> None:
    """Write one line (or, inside ``written_together``, queue it for that block's one INSERT).
    Run status lines come from ``lifecycle.move_run``, never from here."""
    row = run_log_sql.line(
        run_id,
        event.kind,
        at,
        step_id=step_id,
        actor_id=actor.id if actor else None,
        actor_name=actor.name if actor else None,
        detail=event.detail(),
    )
    batch = _batch.get()
    if batch is not None and batch.conn is conn:
        batch.rows.append(row)
        return
    await run_log_sql.write_many(conn, [row])


@dataclass
class LineBatch:
    """The lines a ``written_together`` block has queued so far."""

    conn: AsyncConnection
    rows: list[dict[str, Any]]

    def mark(self) -> int:
        return len(self.rows)

    def drop_since(self, mark: int) -> None:
        """Forget the lines queued after ``mark``: the move they told of was refused, and the
        rest of the transaction (a step's settle) still commits."""
        del self.rows[mark:]


_batch: contextvars.ContextVar[LineBatch | None] = contextvars.ContextVar(
    "runner_history_batch", default=None
)


@contextlib.asynccontextmanager
async def written_together(conn: AsyncConnection) -> AsyncIterator[LineBatch]:
    """Every line ``record`` writes on ``conn`` inside the block goes out as one INSERT when the
    block ends, still in the caller's transaction: a step's settle, a phase boundary and a run's
    end cost one statement for the log, not one per line. Nothing in the block may read lines it
    wrote (none of the engine's transactions does); on an error nothing is written, and the
    transaction is rolled back anyway."""
    batch = LineBatch(conn, [])
    token = _batch.set(batch)
    try:
        yield batch
    finally:
        _batch.reset(token)
    await run_log_sql.write_many(conn, batch.rows)
