"""A housekeeping stage: prune the history of runs that ended longer ago than the retention
period, a small batch per pass.

A run that ended before the cut-off is first *summarised* (``event_run_summaries``: who
started it, who ended it and why, how its steps and reminders ended, how many log lines it
had), then its run-log lines, steps and reminders, its finished Events-tab listing and its
closed live message are deleted, at most ``retention_batch`` rows per statement, each statement
its own transaction. Its row in ``event_runs`` stays: with the summary, that is what
``/event status``, the runs list and ``python -m bot runs`` show of it.

A pass is bounded (a handful of statements, a few hundred rows), because it runs inside the
tick, before the due runs are advanced: a due step waits for one pass at most, never for the
whole backlog. A backlog (retention switched on over a year of history) drains a batch per
housekeeping interval. A run that has not ended is never touched: only terminal runs are
summarised, and only summarised runs lose rows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import retry_on_conflict
from runner.engine.context import EngineContext
from runner.engine.core import StageResult, log
from runner.history import Entry, Kind, ending_from
from runner.sql import retention as retention_sql
from runner.sql.retention import Summary
from runner.states import RunStatus

# Runs summarised, and runs whose rows are deleted, per pass: with a pass every housekeeping
# interval (5 s), 240 runs a minute, far more than any schedule makes (a cron runs at most every
# 5 minutes), and few enough that a pass's reads stay a few milliseconds.
RUNS_PER_PASS = 20


@dataclass(frozen=True)
class Pruned:
    """What one pass did."""

    summarised: int = 0
    rows: int = 0
    finished: int = 0


class Prune:
    """Prune the history of runs that ended longer ago than the retention period, after the
    advance (pruning makes nothing due, so nothing due waits for it)."""

    housekeeping = True

    def __init__(self) -> None:
        # The last failure of a pass, so a failure that repeats every pass is logged once.
        self._prune_error: str | None = None

    async def run(self, ctx: EngineContext) -> StageResult:
        """One pass. A failure is reported and logged (once while it repeats), never raised:
        pruning can always wait for the next pass, and the loop must not back off for it."""
        report = StageResult()
        keep = ctx.settings.keep_run_log_seconds
        if keep <= 0:
            return report
        try:
            pruned = await self.prune_pass(ctx, ctx.clock.now() - dt.timedelta(seconds=keep))
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            report.errors.append(f"retention: {text}")
            if text != self._prune_error:
                log.warning("retention pass failed (run history is kept until a pass succeeds): %s", text)
                self._prune_error = text
            return report
        self._prune_error = None
        report.pruned += pruned.rows
        return report

    async def prune_pass(self, ctx: EngineContext, cutoff: dt.datetime) -> Pruned:
        """One bounded pass: summarise a few runs that ended before ``cutoff``, then delete at
        most ``retention_batch`` rows of summarised runs per statement."""
        summarised = await self._summarise(ctx, cutoff)
        await asyncio.sleep(0)
        run_ids = await self._being_pruned(ctx)
        if not run_ids:
            return Pruned(summarised)
        limit = ctx.settings.retention_batch
        rows = 0
        for delete in (
            retention_sql.delete_log_lines,
            retention_sql.delete_steps,
            retention_sql.delete_listings,
            retention_sql.delete_live_messages,
            retention_sql.delete_undos,
        ):
            # Between statements, whatever fell due meanwhile goes first (on SQLite a statement
            # runs on the event loop's thread, so a pass in one piece would hold it throughout).
            await asyncio.sleep(0)
            deleted = await self._delete(ctx, delete, run_ids, limit)
            rows += deleted
            if deleted >= limit:
                # There may be more of these rows: the next pass carries on from here.
                return Pruned(summarised, rows)
        # Every statement found fewer rows than it could take: these runs are done.
        finished = await self._mark_pruned(ctx, run_ids)
        return Pruned(summarised, rows, finished)

    async def _summarise(self, ctx: EngineContext, cutoff: dt.datetime) -> int:
        """Read outside any write transaction (ended runs' lines never change), then one short
        insert: on SQLite a write transaction holds the database's one writer lock throughout."""
        async with ctx.engine.connect() as conn:
            ended = [
                run
                for run in await retention_sql.ended_before(conn, cutoff, RUNS_PER_PASS)
                if run["status"] in retention_sql.TERMINAL
            ]
            if not ended:
                return 0
            summaries = await _summaries(conn, ended)
        await self._insert_summaries(ctx, summaries)
        return len(summaries)

    @retry_on_conflict
    async def _insert_summaries(self, ctx: EngineContext, summaries: list[Summary]) -> None:
        async with ctx.engine.begin() as conn:
            await retention_sql.insert_summaries(conn, summaries, ctx.clock.now())

    async def _being_pruned(self, ctx: EngineContext) -> list[int]:
        async with ctx.engine.connect() as conn:
            return await retention_sql.being_pruned(conn, RUNS_PER_PASS)

    @retry_on_conflict
    async def _delete(
        self, ctx: EngineContext, delete: retention_sql.Delete, run_ids: list[int], limit: int
    ) -> int:
        async with ctx.engine.begin() as conn:
            return await delete(conn, run_ids, limit)

    @retry_on_conflict
    async def _mark_pruned(self, ctx: EngineContext, run_ids: list[int]) -> int:
        async with ctx.engine.begin() as conn:
            return await retention_sql.mark_pruned(conn, run_ids, ctx.clock.now())


async def _summaries(conn: AsyncConnection, ended: Sequence[retention_sql.Row]) -> list[Summary]:
    """One summary per run, from its ``run.created`` line, its last ``run.status`` line, its
    steps and its line count: three reads for the whole batch, not three per run."""
    run_ids = [int(r["id"]) for r in ended]
    created: dict[int, Entry] = {}
    last_status: dict[int, Entry] = {}
    for row in await retention_sql.lines_of_kind(conn, run_ids, (Kind.RUN_CREATED, Kind.RUN_STATUS)):
        entry = Entry.from_row(row)
        if entry.kind == Kind.RUN_CREATED:
            created.setdefault(entry.run_id, entry)
        else:
            last_status[entry.run_id] = entry
    counts = await retention_sql.step_counts(conn, run_ids)
    lines = await retention_sql.log_counts(conn, run_ids)
    summaries = []
    for run in ended:
        run_id = int(run["id"])
        starter = created[run_id].actor if run_id in created else None
        ending = ending_from(last_status.get(run_id), RunStatus(run["status"]), run["last_error"])
        phase_steps, reminders = counts.get(run_id, ({}, {}))
        summaries.append(
            Summary(
                run_id=run_id,
                ended_at=run["ended_at"],
                started_by_id=starter.id if starter else None,
                started_by_name=starter.name if starter else run["started_by"],
                ended_by_id=ending.by.id if ending.by else None,
                ended_by_name=ending.by.name if ending.by else None,
                ended_why=ending.why,
                steps=phase_steps,
                reminders=reminders,
                log_lines=lines.get(run_id, 0),
            )
        )
    return summaries
