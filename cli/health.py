"""``health``: is the runner doing its job? The database, the bot processes and the runs that
are not well, and the action plugins installed here that were refused, in plain lines (or one
JSON object), with an exit code a monitor can act on."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import plugin_problems
from cli.common import CommandFailed, check_sqlite_location, database_url, load_config, plural, shown_url
from runner.clock import utcnow
from runner.db import create_engine
from runner.views import HealthReport, health
from runner.views.health import HeldStep, ProcessHealth, RunHealth, duration_text, worst_first

EXIT_HEALTHY = 0
# Something is wrong: a problem is listed (the database is reachable).
EXIT_UNHEALTHY = 1
# The database cannot be reached at all, so nothing else could be checked.
EXIT_UNREACHABLE = 3

DESCRIPTION = (
    "Check that the runner is doing its job, and say what is wrong if it is not:\n"
    "  database   reachable, at the schema this code needs, and how long a trivial query takes\n"
    "  process    each bot process's heartbeat: alive (seen within 3 of its tick intervals, at\n"
    "             least 30 s), its tick lag (how much later than due its latest ticks started)\n"
    "             and longest tick, and the runs and steps it holds leases on\n"
    "  runs       the runs in flight that are stalled or degraded, and the runs due but not\n"
    "             picked up (a wake more than 3 tick intervals, at least 30 s, in the past that\n"
    "             no process holds): tick lag seen from the runs, whatever the heartbeats say\n"
    "  plugins    each action plugin installed here that was refused (it registers nothing)\n"
    "Each problem is a line starting 'problem:', each warning 'warning:'.\n\n"
    f"Exit code: {EXIT_HEALTHY} healthy (warnings allowed), {EXIT_UNHEALTHY} a problem was found, "
    f"{EXIT_UNREACHABLE} the database cannot be\nreached (one line says why), 2 a bad config or --database."
)


def cmd_health(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = database_url(args, config)
    try:
        check_sqlite_location(url, must_exist=True)
    except CommandFailed as exc:
        # Connecting would create an empty file: a missing database is one that cannot be reached.
        return _unreachable(args, str(exc))

    async def check() -> HealthReport:
        engine: AsyncEngine = create_engine(url)
        try:
            return await health(engine, utcnow(), interval_seconds=config.tick_interval_seconds)
        finally:
            await engine.dispose()

    try:
        report = asyncio.run(check())
    except sa.exc.SQLAlchemyError as exc:
        # What the drivers raise beyond the usual outage errors (an unknown database, a refused
        # account) is still "cannot use it", in one line.
        reason = getattr(exc, "orig", None) or exc
        return _unreachable(
            args, f"cannot use the database at {shown_url(url)}: {type(reason).__name__}: {reason}"
        )
    if not report.database.reachable:
        return _unreachable(args, f"cannot reach the database at {shown_url(url)}: {report.database.error}")
    plugins = plugin_problems()
    if args.json:
        print(json.dumps(as_json(report, plugins), default=_jsonable))
    else:
        print("\n".join(lines(report, plugins)))
    return EXIT_HEALTHY if report.healthy and not plugins else EXIT_UNHEALTHY


def _unreachable(args: argparse.Namespace, reason: str) -> int:
    if args.json:
        print(
            json.dumps(
                {"healthy": False, "database": {"reachable": False, "error": reason}, "problems": [reason]}
            )
        )
    else:
        print(f"error: {reason}", file=sys.stderr)
    return EXIT_UNREACHABLE


def _jsonable(value: object) -> object:
    if isinstance(value, dt.datetime):
        return value.isoformat() + "Z"
    raise TypeError(f"{type(value).__name__} is not JSON")


def as_json(report: HealthReport, plugins: Sequence[str] = ()) -> dict[str, Any]:
    data = dataclasses.asdict(report)
    for process in data["processes"]:
        source = next(p for p in report.processes if p.owner == process["owner"])
        process["lagging"] = source.lagging
    data.update(
        healthy=report.healthy and not plugins,
        problems=report.problems + list(plugins),
        warnings=report.warnings,
        oldest_overdue_seconds=report.oldest_overdue_seconds,
    )
    return data


def _when(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _run_ids(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:20])
    return shown + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")


def _steps(steps: Sequence[HeldStep]) -> str:
    shown = ", ".join(f"{s.step_id} (run {s.run_id})" for s in steps[:20])
    return shown + (f" and {len(steps) - 20} more" if len(steps) > 20 else "")


def holdings(runs: Sequence[int], steps: Sequence[HeldStep]) -> str:
    parts = []
    if runs:
        parts.append(f"runs {_run_ids(runs)}")
    if steps:
        parts.append(f"steps {_steps(steps)}")
    return "holds " + "; ".join(parts) if parts else "holds nothing"


def process_line(process: ProcessHealth, now: dt.datetime) -> str:
    who = f"process {process.owner} (host {process.host}, pid {process.pid})"
    seen = duration_text(process.seen_ago(now))
    if not process.alive:
        return f"{who}: NOT SEEN for {seen} (stopped without closing, or hangs); {holdings(process.runs, process.steps)}"
    up = duration_text(max((now - process.started_at).total_seconds(), 0.0))
    timing = (
        f"tick lag {duration_text(process.tick_lag_seconds)}{' (LATE)' if process.lagging else ''}, "
        f"longest tick {duration_text(process.tick_seconds)}"
        if process.tick_lag_seconds is not None
        else "no tick yet"
    )
    return f"{who}: alive, seen {seen} ago, up {up}, {timing}; {holdings(process.runs, process.steps)}"


def run_line(run: RunHealth, now: dt.datetime, *, overdue: bool = False) -> str:
    name = f"run {run.id} {run.definition_key}{' (' + run.scope + ')' if run.scope else ''}"
    mark = " [rehearsal]" if run.rehearsal else ""
    state = f"{run.status}, {run.health}"
    if overdue and run.wake_at is not None:
        state += f", due {duration_text((now - run.wake_at).total_seconds())} ago"
    error = f"; last error: {' '.join(run.last_error.split())[:160]}" if run.last_error else ""
    return f"  {name}{mark}: {state}{error}"


def lines(report: HealthReport, plugins: Sequence[str] = ()) -> list[str]:
    now = report.checked_at
    problems, warnings = report.problems + list(plugins), report.warnings
    verdict = "healthy" if not problems else f"UNHEALTHY ({plural(len(problems), 'problem')})"
    out = [f"eventbot health at {_when(now)}: {verdict}"]
    database = report.database
    schema = f"schema {database.schema or 'none'}" + (
        " (current)" if database.schema_current else f" (this code needs {database.head})"
    )
    latency = (
        f"{database.latency_ms:.1f} ms a query" if database.latency_ms is not None else "latency unknown"
    )
    out.append(f"database: {database.backend}, reachable, {latency}, {schema}")
    if database.schema_current:
        if not report.processes:
            out.append("processes: none has ever written a heartbeat here")
        out.extend(process_line(p, now) for p in worst_first(report.processes))
        for holder in report.other_holders:
            out.append(f"leases held by {holder.owner} (no heartbeat): {holdings(holder.runs, holder.steps)}")
        out.append(f"runs stalled or degraded: {report.unwell_total}")
        out.extend(run_line(r, now) for r in report.unwell)
        if report.unwell_total > len(report.unwell):
            out.append(f"  … and {report.unwell_total - len(report.unwell)} more")
        tolerance = duration_text(report.overdue_after_seconds)
        out.append(f"runs due but not picked up (more than {tolerance} late): {report.overdue_total}")
        out.extend(run_line(r, now, overdue=True) for r in report.overdue)
        if report.overdue_total > len(report.overdue):
            out.append(f"  … and {report.overdue_total - len(report.overdue)} more")
    out.extend(f"problem: {p}" for p in problems)
    out.extend(f"warning: {w}" for w in warnings)
    return out
