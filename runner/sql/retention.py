"""Statements of retention: the run log, steps and bookkeeping rows of runs that ended long ago
are deleted in small batches; each such run keeps its row and gains a summary
(``event_run_summaries``).

Every statement here is bounded: a pass summarises at most a few dozen runs and deletes at most
``limit`` rows per statement, each in its own short transaction (the caller's), so no pass holds
a lock for long and a due step never waits behind a prune.

Two rules keep cursor readers (the staff log, the live messages, the Discord mirror, which read
"lines after id N") whole:

* Only lines of runs that ended before the cut-off are deleted, and those are old: a reader's
  cursor has long passed them, and a line after its cursor is never taken away.
* The newest row of ``event_run_log`` and of ``event_run_steps`` is never deleted. SQLite (with
  no ``AUTOINCREMENT``) numbers a new row one past the largest id in the table, so deleting the
  newest rows would hand their ids out again: a reader whose cursor already passed them would
  skip the new lines, and a stale cue button would name a new step. MariaDB's counter never goes
  back, but the rule costs one row and is kept on both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.definitions import REMINDERS_PHASE
from runner.schema import (
    LISTING_FINAL_STATUSES,
    listings,
    live_messages,
    run_log,
    run_summaries,
    run_undos,
    runs,
    steps,
)
from runner.states import RUN_TERMINAL, STEP_OPEN, UNDO_OPEN

Row = sa.RowMapping
TERMINAL = frozenset(status.value for status in RUN_TERMINAL)
_OPEN = sorted(status.value for status in STEP_OPEN)
_UNDO_OPEN = [s.value for s in UNDO_OPEN]
# Naive UTC like every stored instant: before any run ended.
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Summary:
    """What is kept of one run whose history is pruned (a row of ``event_run_summaries``)."""

    run_id: int
    ended_at: dt.datetime
    started_by_id: str | None
    started_by_name: str | None
    ended_by_id: str | None
    ended_by_name: str | None
    ended_why: str | None
    steps: dict[str, int]
    reminders: dict[str, int]
    log_lines: int

    def row(self, now: dt.datetime) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ended_at": self.ended_at,
            "started_by_id": self.started_by_id,
            "started_by_name": None if self.started_by_name is None else self.started_by_name[:100],
            "ended_by_id": self.ended_by_id,
            "ended_by_name": None if self.ended_by_name is None else self.ended_by_name[:100],
            "ended_why": None if self.ended_why is None else self.ended_why[:500],
            "steps": self.steps,
            "reminders": self.reminders,
            "log_lines": self.log_lines,
            "pruned_at": None,
            "created_at": now,
        }


# ── Finding the runs to summarise ────────────────────────────────────────────


async def ended_before(conn: AsyncConnection, cutoff: dt.datetime, limit: int) -> Sequence[Row]:
    """Ended runs with no summary yet whose end is before ``cutoff``, oldest end first. The scan
    starts at the newest end already summarised (``idx_evsum_ended``, then ``idx_evrun_ended``),
    so it never walks the runs earlier passes have done; ``>=`` keeps runs that ended at the
    very same instant as the last one done.

    Only a terminal move stamps ``ended_at`` and no terminal status moves again, so the range
    is the ended runs; the caller still checks each status. Naming the statuses here would let
    SQLite pick ``idx_evrun_due`` (status first) and walk every ended run on every pass."""
    resume = sa.select(sa.func.coalesce(sa.func.max(run_summaries.c.ended_at), _EPOCH)).scalar_subquery()
    query = (
        sa.select(runs.c.id, runs.c.status, runs.c.ended_at, runs.c.started_by, runs.c.last_error)
        .where(
            runs.c.ended_at < cutoff,
            runs.c.ended_at >= resume,
            ~sa.exists().where(run_summaries.c.run_id == runs.c.id),
        )
        .order_by(runs.c.ended_at, runs.c.id)
        .limit(limit)
    )
    return (await conn.execute(query)).mappings().all()


async def lines_of_kind(conn: AsyncConnection, run_ids: Sequence[int], kinds: Sequence[str]) -> Sequence[Row]:
    """Every line of these kinds of these runs, oldest first (``idx_evlog_run``)."""
    query = (
        sa.select(run_log)
        .where(run_log.c.run_id.in_(list(run_ids)), run_log.c.kind.in_(list(kinds)))
        .order_by(run_log.c.id)
    )
    return (await conn.execute(query)).mappings().all()


async def log_counts(conn: AsyncConnection, run_ids: Sequence[int]) -> dict[int, int]:
    query = (
        sa.select(run_log.c.run_id, sa.func.count())
        .where(run_log.c.run_id.in_(list(run_ids)))
        .group_by(run_log.c.run_id)
    )
    return {int(run_id): int(n) for run_id, n in (await conn.execute(query)).all()}


async def step_counts(
    conn: AsyncConnection, run_ids: Sequence[int]
) -> dict[int, tuple[dict[str, int], dict[str, int]]]:
    """Per run: how many of its phases' steps, and of its reminders, ended in each status."""
    is_reminder = steps.c.phase == REMINDERS_PHASE
    query = (
        sa.select(steps.c.run_id, is_reminder.label("reminder"), steps.c.status, sa.func.count())
        .where(steps.c.run_id.in_(list(run_ids)))
        .group_by(steps.c.run_id, is_reminder, steps.c.status)
    )
    out: dict[int, tuple[dict[str, int], dict[str, int]]] = {}
    for run_id, reminder, status, n in (await conn.execute(query)).all():
        phase_steps, reminders = out.setdefault(int(run_id), ({}, {}))
        (reminders if reminder else phase_steps)[str(status)] = int(n)
    return out


async def insert_summaries(conn: AsyncConnection, summaries: Sequence[Summary], now: dt.datetime) -> None:
    """A run another runner summarised a moment before is left as that runner wrote it: both
    read the same lines, and a refused insert would roll back the rest of the batch."""
    if summaries:
        await conn.execute(_INSERT_SUMMARY, [s.row(now) for s in summaries])


_INSERT_SUMMARY = (
    sa.insert(run_summaries)
    .prefix_with("OR IGNORE", dialect="sqlite")
    .prefix_with("IGNORE", dialect="mysql")
    .prefix_with("IGNORE", dialect="mariadb")
)


# ── Deleting their rows ──────────────────────────────────────────────────────

# A bounded delete of one table's rows of some runs: (connection, run ids, most rows) -> rows.
Delete = Callable[[AsyncConnection, Sequence[int], int], Awaitable[int]]


async def being_pruned(conn: AsyncConnection, limit: int) -> list[int]:
    """Summarised runs whose rows are still being deleted, lowest id first (``idx_evsum_pruning``)."""
    query = (
        sa.select(run_summaries.c.run_id)
        .where(run_summaries.c.pruned_at.is_(None))
        .order_by(run_summaries.c.run_id)
        .limit(limit)
    )
    return [int(r) for r in (await conn.execute(query)).scalars().all()]


async def newest_id(conn: AsyncConnection, table: sa.Table) -> int:
    """The largest id in ``table`` (0 when empty): rows at or above it are never deleted (see
    the module's docstring). Read apart from the DELETE, which MariaDB would refuse to let read
    the table it deletes from."""
    return int((await conn.execute(sa.select(sa.func.coalesce(sa.func.max(table.c.id), 0)))).scalar() or 0)


async def _delete_bounded(
    conn: AsyncConnection,
    table: sa.Table,
    key: sa.ColumnElement[Any],
    where: sa.ColumnElement[bool],
    limit: int,
) -> int:
    """Delete at most ``limit`` rows matching ``where``: ``DELETE ... LIMIT`` on MariaDB; on
    SQLite (built without it) the ids are selected first and deleted by primary key."""
    if limit <= 0:
        return 0
    if conn.dialect.name == "sqlite":
        ids = (await conn.execute(sa.select(key).where(where).limit(limit))).scalars().all()
        if not ids:
            return 0
        result = await conn.execute(sa.delete(table).where(key.in_(list(ids))))
        return int(result.rowcount)
    result = await conn.execute(sa.delete(table).where(where).with_dialect_options(mysql_limit=limit))
    return int(result.rowcount)


async def delete_log_lines(conn: AsyncConnection, run_ids: Sequence[int], limit: int) -> int:
    below = await newest_id(conn, run_log)
    where = sa.and_(run_log.c.run_id.in_(list(run_ids)), run_log.c.id < below)
    return await _delete_bounded(conn, run_log, run_log.c.id, where, limit)


async def delete_steps(conn: AsyncConnection, run_ids: Sequence[int], limit: int) -> int:
    """Steps and reminders of these runs; an open one (a run long ended never has one, but a
    step still leased is not retention's to judge) stays."""
    below = await newest_id(conn, steps)
    where = sa.and_(steps.c.run_id.in_(list(run_ids)), steps.c.status.not_in(_OPEN), steps.c.id < below)
    return await _delete_bounded(conn, steps, steps.c.id, where, limit)


async def delete_listings(conn: AsyncConnection, run_ids: Sequence[int], limit: int) -> int:
    """Events-tab listings Discord is done with (a final pushed status): only scheduled runs
    are ever listed again, so an ended run's row is bookkeeping nobody reads."""
    where = sa.and_(
        listings.c.run_id.in_(list(run_ids)), listings.c.pushed_status.in_(LISTING_FINAL_STATUSES)
    )
    return await _delete_bounded(conn, listings, listings.c.run_id, where, limit)


async def delete_live_messages(conn: AsyncConnection, run_ids: Sequence[int], limit: int) -> int:
    """Live messages that have shown their run's end (an unclosed one is still to be edited)."""
    where = sa.and_(live_messages.c.run_id.in_(list(run_ids)), live_messages.c.closed.is_(sa.true()))
    return await _delete_bounded(conn, live_messages, live_messages.c.run_id, where, limit)


async def delete_undos(conn: AsyncConnection, run_ids: Sequence[int], limit: int) -> int:
    """Cleanup ledger entries no cleanup will run any more: done, failed or manual (an open
    one belongs to a cleanup still under way)."""
    where = sa.and_(run_undos.c.run_id.in_(list(run_ids)), run_undos.c.status.not_in(_UNDO_OPEN))
    return await _delete_bounded(conn, run_undos, run_undos.c.id, where, limit)


async def mark_pruned(conn: AsyncConnection, run_ids: Sequence[int], now: dt.datetime) -> int:
    query = (
        sa.update(run_summaries)
        .where(run_summaries.c.run_id.in_(list(run_ids)), run_summaries.c.pruned_at.is_(None))
        .values(pruned_at=now)
    )
    return int((await conn.execute(query)).rowcount)


# ── Reading a summary ────────────────────────────────────────────────────────


async def summary_of(conn: AsyncConnection, run_id: int) -> Row | None:
    query = sa.select(run_summaries).where(run_summaries.c.run_id == run_id)
    return (await conn.execute(query)).mappings().first()
