"""``upcoming``: what the published schedule holds next, each time in the event's own zone and
in UTC (the command line has no reader's zone to show it in, so it names both)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from cli.common import (
    EXIT_OK,
    CommandFailed,
    check_sqlite_location,
    database_url,
    load_config,
    on_database,
    require_schema,
)
from runner import catalog, schedule, views
from runner.clock import utcnow
from runner.errors import UnknownDefinition

DEFAULT_COUNT = 3
CREATED_NOTE = (
    "A run id is an occurrence already created (cancel it before it starts with /event cancel); "
    "the others are created as they come near."
)


def cmd_upcoming(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = database_url(args, config)
    check_sqlite_location(url, must_exist=True)

    async def read(engine: AsyncEngine) -> list[views.UpcomingEvent]:
        await require_schema(engine, url)
        try:
            return await views.upcoming(
                engine, catalog.VersionCache(), utcnow(), key=args.event, count=args.count
            )
        except UnknownDefinition as exc:
            raise CommandFailed(exc.message) from None

    events = asyncio.run(on_database(url, read))
    if args.json:
        for event in events:
            print(json.dumps(_record(event)))
        return EXIT_OK
    if not events:
        print("no scheduled events are published (an event with a cron or once schedule is listed here)")
        return EXIT_OK
    print("\n\n".join(event_lines(event) for event in events))
    if any(o.run_id is not None for e in events for s in e.scopes for o in s.occurrences):
        print(f"\n{CREATED_NOTE}")
    return EXIT_OK


def event_lines(event: views.UpcomingEvent) -> str:
    head = f"{event.key} ({event.title!r}) v{event.version}: {event.schedule}"
    if event.unreadable:
        return f"{head}\n  its definition cannot be read, so nothing of it will run: {event.unreadable}"
    if not event.scheduled:
        return f"{head}\n  no schedule: it starts only when staff start it"
    lines = [head]
    if event.reminders:
        lines.append(f"  reminders: {', '.join(event.reminders)} before each occurrence")
    for scope in event.scopes:
        indent = "  "
        if scope.scope:
            lines.append(f"  scope {scope.scope}:")
            indent = "    "
        if not scope.occurrences:
            lines.append(f"{indent}nothing to come (the schedule has no more occurrences)")
        lines.extend(f"{indent}{occurrence_line(o, event.zone)}" for o in scope.occurrences)
    return "\n".join(lines)


def occurrence_line(occurrence: schedule.Upcoming, zone: str) -> str:
    if occurrence.skipped:
        return f"skipped   {schedule.shown(occurrence.at, zone)}"
    run = f"run {occurrence.run_id}" if occurrence.run_id is not None else "planned"
    moved = f" (moved from {schedule.shown(occurrence.moved_from, zone)})" if occurrence.moved_from else ""
    return f"{run:<10}{schedule.shown(occurrence.at, zone)}{moved}"


def next_line(events: Sequence[views.UpcomingEvent]) -> str | None:
    """The soonest occurrence of them all, as ``runs`` names it when nothing is in flight."""
    soonest = [(e.next_at, e) for e in events if e.next_at is not None]
    if not soonest:
        return None
    at, event = min(soonest, key=lambda pair: pair[0])
    return f"next: {event.key} at {schedule.shown(at, event.zone)}"


def _record(event: views.UpcomingEvent) -> dict[str, object]:
    return {
        "key": event.key,
        "title": event.title,
        "version": event.version,
        "schedule": event.schedule,
        "timezone": event.zone,
        "reminders": event.reminders,
        "unreadable": event.unreadable,
        "scopes": [
            {
                "scope": s.scope,
                "occurrences": [
                    {
                        "at_utc": o.at.isoformat() + "Z",
                        "shown": schedule.shown(o.at, event.zone),
                        "run_id": o.run_id,
                        "date_skipped": o.skipped,
                        "moved_from_utc": o.moved_from.isoformat() + "Z" if o.moved_from else None,
                    }
                    for o in s.occurrences
                ],
            }
            for s in event.scopes
        ],
    }
