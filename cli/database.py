"""``migrate`` and ``runs``: the schema, and the runs it holds."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from cli.common import (
    EXIT_OK,
    check_sqlite_location,
    database_url,
    load_config,
    on_database,
    require_schema,
    shown_url,
)
from runner import views
from runner.migrate import current_revision, upgrade


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

    async def read(engine: AsyncEngine) -> list[views.RunSummary]:
        await require_schema(engine, url)
        return await views.list_runs(engine, in_flight_only=not args.all, limit=args.limit)

    runs = asyncio.run(on_database(url, read))
    if args.json:
        for run in runs:
            print(json.dumps(run.__dict__, default=str))
        return EXIT_OK
    if not runs:
        print("no runs" if args.all else "no runs in flight (--all shows finished ones too)")
        return EXIT_OK
    print(_table(runs))
    return EXIT_OK


RUN_COLUMNS = ("ID", "EVENT", "SCOPE", "STATUS", "HEALTH", "PHASE", "SCHEDULED (UTC)", "MODE", "LAST ERROR")


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
