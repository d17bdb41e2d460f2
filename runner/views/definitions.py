"""The published events as front ends list them: each with its schedule and next occurrence,
the schedule people read (what comes next, per scope: issue 11), and the current definition a
start preflights.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import catalog, schedule
from runner.definitions import EventDefinition, ManualSchedule
from runner.errors import UnknownDefinition, UnreadableDefinition
from runner.schedule import ScopeUpcoming
from runner.sql import definitions as definitions_sql
from runner.sql import run_occurrences


async def unreadable_versions(
    conn: AsyncConnection, versions: catalog.VersionCache, version_ids: Iterable[int]
) -> dict[int, str]:
    """The reason each of these versions cannot be read, for those that cannot."""
    found = {}
    for version_id in sorted(version_ids):
        try:
            await versions.get(conn, version_id)
        except UnreadableDefinition as exc:
            found[version_id] = exc.reason
    return found


@dataclass(frozen=True)
class DefinitionSummary:
    key: str
    title: str
    version: int
    scopes: list[str]
    schedule: str
    # Why its current version cannot be read, if it cannot: it is listed, but cannot be started.
    unreadable: str | None = None
    # Its next occurrence in any scope (naive UTC), when asked for with ``now``; the zone a
    # person reads its times in (its cron's, otherwise UTC).
    next_at: dt.datetime | None = None
    zone: str = "UTC"


async def list_definitions(
    engine: AsyncEngine, versions: catalog.VersionCache | None = None, *, now: dt.datetime | None = None
) -> list[DefinitionSummary]:
    """Every published event; with ``now``, each with its next occurrence (the autocompletes
    leave it out: it costs a read of the scheduled runs)."""
    versions = versions or catalog.VersionCache()
    async with engine.connect() as conn:
        rows = await definitions_sql.list_all(conn)
        unreadable = await unreadable_versions(conn, versions, {int(r["current_version_id"]) for r in rows})
        # Through the model, as every other reader of a stored definition: the cache already
        # holds each readable one.
        readable = {
            int(r["current_version_id"]): await versions.get(conn, int(r["current_version_id"]))
            for r in rows
            if int(r["current_version_id"]) not in unreadable
        }
        created = await _created_by_definition(conn) if now is not None else {}
    summaries = []
    for row in rows:
        reason = unreadable.get(int(row["current_version_id"]))
        if reason is not None:
            summaries.append(
                DefinitionSummary(row["key"], row["title"], int(row["version"]), [], "unreadable", reason)
            )
            continue
        definition = readable[int(row["current_version_id"])]
        next_at = None
        if now is not None:
            plan = _plan(definition, row, created, now, 1)
            next_at = min((o.at for s in plan for o in s.occurrences if not o.skipped), default=None)
        summaries.append(
            DefinitionSummary(
                row["key"],
                row["title"],
                int(row["version"]),
                list(definition.scopes),
                schedule.describe(definition.schedule),
                next_at=next_at,
                zone=schedule.zone_of(definition),
            )
        )
    return summaries


# ── The schedule people read: what comes next (issue 11) ─────────────────────


@dataclass(frozen=True)
class UpcomingEvent:
    """A published event's occurrences to come, per scope (``scopes`` is empty for an event
    with no schedule, and for one whose definition cannot be read)."""

    key: str
    title: str
    version: int
    schedule: str
    # The zone a person reads its times in: its cron's own, otherwise UTC.
    zone: str
    scheduled: bool
    # Its reminders' lead times, as authors write them (``1h``, ``15m``), longest first.
    reminders: list[str]
    scopes: list[ScopeUpcoming]
    unreadable: str | None = None

    @property
    def next_at(self) -> dt.datetime | None:
        return min((o.at for s in self.scopes for o in s.occurrences if not o.skipped), default=None)


async def upcoming(
    engine: AsyncEngine,
    versions: catalog.VersionCache,
    now: dt.datetime,
    *,
    key: str | None = None,
    count: int = 3,
) -> list[UpcomingEvent]:
    """The next ``count`` occurrences of each scope of every scheduled event (or of the one
    called ``key``, scheduled or not; ``UnknownDefinition`` when there is none): the runs already
    created, with their ids, then the ones the runner will create."""
    async with engine.connect() as conn:
        rows = [r for r in await definitions_sql.list_all(conn) if key is None or r["key"] == key]
        if key is not None and not rows:
            raise UnknownDefinition(f"no published event is called {key!r}")
        ids = [int(r["id"]) for r in rows]
        created = await _created_by_definition(conn, ids)
        found: list[tuple[sa.RowMapping, EventDefinition | str]] = []
        for row in rows:
            try:
                found.append((row, await versions.get(conn, int(row["current_version_id"]))))
            except UnreadableDefinition as exc:
                found.append((row, exc.reason))
    events = []
    for row, definition in found:
        if isinstance(definition, str):
            events.append(
                UpcomingEvent(
                    row["key"],
                    row["title"],
                    int(row["version"]),
                    "unreadable",
                    "UTC",
                    False,
                    [],
                    [],
                    definition,
                )
            )
            continue
        scheduled = not isinstance(definition.schedule, ManualSchedule)
        if not scheduled and key is None:
            continue
        leads = sorted(definition.reminders, key=lambda r: r.before, reverse=True)
        events.append(
            UpcomingEvent(
                key=definition.key,
                title=definition.title,
                version=int(row["version"]),
                schedule=schedule.describe(definition.schedule),
                zone=schedule.zone_of(definition),
                scheduled=scheduled,
                reminders=[r.shown_lead() for r in leads],
                scopes=_plan(definition, row, created, now, count) if scheduled else [],
            )
        )
    return events


Created = dict[int, list[tuple[int, str, dt.datetime]]]


async def _created_by_definition(
    conn: AsyncConnection, definition_ids: Sequence[int] | None = None
) -> Created:
    """Each definition's runs created and not yet started: (run id, scope, start)."""
    created: Created = {}
    for run in await run_occurrences.scheduled_of_definitions(conn, definition_ids):
        created.setdefault(int(run["definition_id"]), []).append(
            (int(run["id"]), run["scope"], run["scheduled_for"])
        )
    return created


def _plan(
    definition: EventDefinition, row: sa.RowMapping, created: Created, now: dt.datetime, count: int
) -> list[schedule.ScopeUpcoming]:
    return schedule.upcoming_by_scope(
        definition, created.get(int(row["id"]), []), row["materialised_until"], now, count
    )


async def current_definition(
    engine: AsyncEngine, key: str, versions: catalog.VersionCache
) -> catalog.CurrentDefinition:
    """The published definition ``/event start`` preflights; raises ``UnknownDefinition``."""
    async with engine.connect() as conn:
        return await catalog.current(conn, key, versions)


async def published_definitions(engine: AsyncEngine, versions: catalog.VersionCache) -> list[EventDefinition]:
    """The current definition of every published event that can be read (an unreadable one is
    ``list_definitions``' to report)."""
    async with engine.connect() as conn:
        rows = await definitions_sql.list_all(conn)
        ids = {int(r["current_version_id"]) for r in rows}
        unreadable = await unreadable_versions(conn, versions, ids)
        return [await versions.get(conn, i) for i in sorted(ids) if i not in unreadable]
