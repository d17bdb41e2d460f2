"""``migrate`` and ``runs``: the schema, and the runs it holds."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from cli.common import (
    EXIT_OK,
    check_sqlite_location,
    database_url,
    load_config,
    on_database,
    plural,
    require_schema,
    shown_url,
)
from cli.upcoming import next_line
from runner import catalog, views
from runner.clock import utcnow
from runner.migrate import current_revision, upgrade
from runner.states import RUN_IN_FLIGHT, CleanupStatus, RunStatus
from wiring.run_text import STEP_FAILED, last_error_text


def cmd_migrate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = database_url(args, config)

    async def migrate(engine: AsyncEngine) -> str | None:
        await upgrade(engine)
        return await current_revision(engine)

    revision = asyncio.run(on_database(url, migrate))
    print(f"database {shown_url(url)} is at revision {revision} (head)")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = database_url(args, config)
    check_sqlite_location(url, must_exist=True)

    async def read(engine: AsyncEngine) -> tuple[list[views.RunSummary], list[views.UpcomingEvent]]:
        await require_schema(engine, url)
        found = await views.list_runs(engine, in_flight_only=not args.all, limit=args.limit)
        if args.json:
            return found, []
        if found:
            versions = catalog.VersionCache()
            return [await _worded(engine, versions, run) for run in found], []
        # Nothing in flight says nothing of what is booked: name the next occurrence instead.
        return found, await views.upcoming(engine, catalog.VersionCache(), utcnow(), count=1)

    runs, coming = asyncio.run(on_database(url, read))
    if args.json:
        for run in runs:
            print(json.dumps(run.__dict__, default=str))
        return EXIT_OK
    if not runs:
        print("no runs" if args.all else "no runs in flight (--all shows finished ones too)")
        soonest = next_line(coming)
        print(
            f"no run is scheduled yet; {soonest} (`python -m bot upcoming` lists what comes next)"
            if soonest
            else "nothing is scheduled: no published event has an occurrence to come"
        )
        return EXIT_OK
    print(_table(runs))
    print(_counts(runs))
    return EXIT_OK


async def _worded(
    engine: AsyncEngine, versions: catalog.VersionCache, run: views.RunSummary
) -> views.RunSummary:
    """A run stopped by a failed step, with that step named as the rehearsal and /event status
    name it (``step 5 (Open the gates) failed: …``); only such a run costs a read of its steps."""
    if run.last_error is None or not STEP_FAILED.fullmatch(run.last_error):
        return run
    view = await views.run_view(engine, run.id, versions)
    return dataclasses.replace(run, last_error=last_error_text(view)) if view is not None else run


def _counts(runs: Sequence[views.RunSummary]) -> str:
    """How many of the listed runs are booked but not started, beside those under way."""
    scheduled = sum(run.status == RunStatus.SCHEDULED for run in runs)
    under_way = sum(run.status in RUN_IN_FLIGHT and run.status != RunStatus.SCHEDULED for run in runs)
    ended = len(runs) - scheduled - under_way
    parts = [f"{scheduled} scheduled (not started yet)", f"{under_way} under way"]
    if ended:
        parts.append(f"{ended} ended")
    hint = "; `python -m bot upcoming` lists what comes next" if scheduled else ""
    return f"{plural(len(runs), 'run')}: {', '.join(parts)}{hint}"


RUN_COLUMNS = (
    "ID",
    "EVENT",
    "SCOPE",
    "STATUS",
    "HEALTH",
    "PHASE",
    "SCHEDULED (UTC)",
    "MODE",
    "CLEANUP",
    "LAST ERROR",
)


def _table(runs: Sequence[views.RunSummary]) -> str:
    rows = [
        (
            str(run.id),
            run.definition_key,
            run.scope or "-",
            run.status,
            run.health,
            run.current_phase or "-",
            run.scheduled_for.strftime("%Y-%m-%d %H:%M:%S"),
            "rehearsal" if run.rehearsal else "live",
            # What a cancel's cleanup got to (``not_required`` unless a cancel asked for one).
            "-" if run.cleanup_status is CleanupStatus.NOT_REQUIRED else run.cleanup_status,
            # A run the runner cannot read is left alone with no error of its own: say why.
            _one_line(f"definition unreadable: {run.unreadable}" if run.unreadable else run.last_error)[:80],
        )
        for run in runs
    ]
    widths = [max(len(row[i]) for row in [RUN_COLUMNS, *rows]) for i in range(len(RUN_COLUMNS))]
    lines = [_format_row(RUN_COLUMNS, widths)] + [_format_row(row, widths) for row in rows]
    return "\n".join(lines)


def _one_line(text: str | None) -> str:
    return (text or "-").replace("\n", " ")


def _format_row(row: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
