"""Read-only projections for front ends: a run's status, lists of runs, a step's context.

Front ends render these; they never query the tables themselves.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import catalog, history, schedule
from runner.definitions import REMINDERS_PHASE, EventDefinition, ManualSchedule, PhaseDefinition
from runner.errors import UnknownDefinition, UnreadableDefinition
from runner.history import Actor
from runner.records import StepRecord
from runner.schedule import ScopeUpcoming
from runner.sql import definitions as definitions_sql
from runner.sql import reminders as reminders_sql
from runner.sql import run_log
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import RUN_IN_FLIGHT, STEP_OPEN


@dataclass(frozen=True)
class StepContext:
    """Where a step sits, for the text of the messages it sends."""

    event_key: str
    event_title: str
    phase_key: str
    phase_label: str
    step_index: int
    step_label: str | None
    scope: str
    rehearsal: bool
    # When the run's occurrence starts (naive UTC): ``{start}`` in its text.
    starts_at: dt.datetime | None = None


@dataclass(frozen=True)
class StepView:
    id: int | None
    phase: str
    seq: int
    label: str
    action_id: str
    status: str
    parked: bool
    due_at: dt.datetime | None
    attempts: int
    last_error: str | None
    settled_by: Actor | None
    result: dict[str, Any] | None


@dataclass(frozen=True)
class PhaseView:
    key: str
    label: str
    current: bool
    steps: list[StepView]


@dataclass(frozen=True)
class RunView:
    id: int
    definition_key: str
    title: str
    scope: str
    status: str
    health: str
    rehearsal: bool
    current_phase: str | None
    scheduled_for: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    # Who started it by hand (the schedule is an actor too, named ``schedule``).
    started_by: Actor | None
    last_error: str | None
    version_id: int
    phases: list[PhaseView] = field(default_factory=list)
    # Why the run's definition version cannot be read, if it cannot: the phases are then only
    # the steps the run already has, labelled by their phase keys.
    unreadable: str | None = None

    @property
    def in_flight(self) -> bool:
        return self.status in RUN_IN_FLIGHT

    def open_steps(self) -> list[StepView]:
        return [s for p in self.phases for s in p.steps if s.id is not None and s.status in STEP_OPEN]


def _label(step_label: str | None, action_id: str) -> str:
    return step_label or action_id


async def run_view(engine: AsyncEngine, run_id: int, versions: catalog.VersionCache) -> RunView | None:
    """A run as it stands; a run whose definition cannot be read is still shown, marked."""
    async with engine.connect() as conn:
        run = await runs_sql.get(conn, run_id)
        if run is None:
            return None
        definition_row = await definitions_sql.by_id(conn, int(run["definition_id"]))
        definition: EventDefinition | None
        try:
            definition = await versions.get(conn, int(run["version_id"]))
            unreadable = None
        except UnreadableDefinition as exc:
            definition, unreadable = None, exc.reason
        step_records = await steps_sql.list_for_run(conn, run_id)
        started_by = _started_by(await history.entries_for_run(conn, run_id), run["started_by"])
    by_slot = {(s.phase, s.seq): s for s in step_records}
    if definition is not None:
        layout = [(p.key, p.label, [(s.label, s.action) for s in p.steps]) for p in definition.phases]
    else:
        layout = _layout_of_rows(step_records)
    phases = []
    for phase_key, phase_label, specs in layout:
        step_views = []
        for seq, (label, action) in enumerate(specs):
            row = by_slot.get((phase_key, seq))
            if row is None:
                step_views.append(
                    StepView(
                        None,
                        phase_key,
                        seq,
                        _label(label, action),
                        action,
                        "not reached",
                        False,
                        None,
                        0,
                        None,
                        None,
                        None,
                    )
                )
                continue
            step_views.append(
                StepView(
                    id=row.id,
                    phase=phase_key,
                    seq=seq,
                    label=_label(row.label, row.action_id),
                    action_id=row.action_id,
                    status=row.status,
                    parked=row.parked,
                    due_at=row.due_at,
                    attempts=row.attempts,
                    last_error=row.last_error,
                    settled_by=row.settled_by,
                    result=row.result,
                )
            )
        phases.append(PhaseView(phase_key, phase_label, phase_key == run["current_phase"], step_views))
    if definition_row is not None:
        key, title = definition_row["key"], definition_row["title"]
    else:
        key, title = (definition.key, definition.title) if definition else ("?", f"run {run_id}")
    return RunView(
        id=run_id,
        definition_key=key,
        title=definition.title if definition is not None else title,
        scope=run["scope"],
        status=run["status"],
        health=run["health"],
        rehearsal=bool(run["rehearsal"]),
        current_phase=run["current_phase"],
        scheduled_for=run["scheduled_for"],
        started_at=run["started_at"],
        ended_at=run["ended_at"],
        started_by=started_by,
        last_error=run["last_error"],
        version_id=int(run["version_id"]),
        phases=phases,
        unreadable=unreadable,
    )


def _started_by(entries: Sequence[history.Entry], stored: str | None) -> Actor | None:
    """Who started the run, as its history says (the ``run.created`` line keeps the actor with
    its id); the runs table's name for a run whose line is gone."""
    created = next((e for e in entries if isinstance(e.event, history.RunCreated)), None)
    if created is not None and created.actor is not None:
        return created.actor
    return catalog.as_actor(stored)


def _layout_of_rows(
    step_records: Sequence[StepRecord],
) -> list[tuple[str, str, list[tuple[str | None, str]]]]:
    """Phases and steps as far as the run's own rows tell them, when its definition is unreadable:
    the phases it has entered, in the order it entered them, each labelled by its key."""
    by_phase: dict[str, dict[int, tuple[str | None, str]]] = {}
    for step in sorted(step_records, key=lambda s: s.id):
        if step.phase == REMINDERS_PHASE:
            # Reminders are no phase of the run (``reminders_of_run`` shows them).
            continue
        by_phase.setdefault(step.phase, {})[step.seq] = (step.label, step.action_id)
    layout = []
    for phase_key, slots in by_phase.items():
        specs = [slots.get(seq, (None, "?")) for seq in range(max(slots) + 1)]
        layout.append((phase_key, phase_key, specs))
    return layout


@dataclass(frozen=True)
class RunSummary:
    id: int
    definition_key: str
    title: str
    scope: str
    status: str
    health: str
    rehearsal: bool
    scheduled_for: dt.datetime
    current_phase: str | None
    last_error: str | None
    # Why the run's definition version cannot be read, if it cannot (the runner leaves it alone).
    unreadable: str | None = None


async def list_runs(
    engine: AsyncEngine,
    *,
    in_flight_only: bool = False,
    limit: int = 50,
    versions: catalog.VersionCache | None = None,
) -> list[RunSummary]:
    versions = versions or catalog.VersionCache()
    async with engine.connect() as conn:
        rows = await runs_sql.list_runs(
            conn, statuses=sorted(RUN_IN_FLIGHT) if in_flight_only else None, limit=limit
        )
        unreadable = await _unreadable_versions(conn, versions, {int(r["version_id"]) for r in rows})
    return [
        RunSummary(
            id=int(r["id"]),
            definition_key=r["definition_key"],
            title=r["definition_title"],
            scope=r["scope"],
            status=r["status"],
            health=r["health"],
            rehearsal=bool(r["rehearsal"]),
            scheduled_for=r["scheduled_for"],
            current_phase=r["current_phase"],
            last_error=r["last_error"],
            unreadable=unreadable.get(int(r["version_id"])),
        )
        for r in rows
    ]


async def _unreadable_versions(
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
        unreadable = await _unreadable_versions(conn, versions, {int(r["current_version_id"]) for r in rows})
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
            next_at = min((s.occurrences[0].at for s in plan if s.occurrences), default=None)
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
        return min((s.occurrences[0].at for s in self.scopes if s.occurrences), default=None)


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
    for run in await runs_sql.scheduled_of_definitions(conn, definition_ids):
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


async def log_for_run(engine: AsyncEngine, run_id: int) -> Sequence[history.Entry]:
    """A run's history, oldest first, as typed entries (the one reader, ``runner.history``)."""
    async with engine.connect() as conn:
        return await history.entries_for_run(conn, run_id)


def step_describer(
    engine: AsyncEngine, versions: catalog.VersionCache, *, cache_size: int = 4096
) -> Callable[[int, int], Awaitable[StepContext | None]]:
    """Where a step sits (event, phase, step label, scope, rehearsal), for message text.

    Everything it reads is immutable once the step exists, so answers are cached.
    """
    cache: OrderedDict[tuple[int, int], StepContext] = OrderedDict()

    async def describe(run_id: int, step_id: int) -> StepContext | None:
        key = (run_id, step_id)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        async with engine.connect() as conn:
            run = await runs_sql.get(conn, run_id)
            step = await steps_sql.get(conn, step_id)
            if run is None or step is None:
                return None
            try:
                definition = await versions.get(conn, int(run["version_id"]))
            except UnreadableDefinition:
                # The engine never dispatches such a run, but a cue already posted may be redrawn:
                # the tables still know the event's key, title and the phase's key.
                definition = None
                row = await definitions_sql.by_id(conn, int(run["definition_id"]))
        if definition is not None:
            phase = definition.phase(step["phase"])
            event_key, event_title = definition.key, definition.title

        else:
            phase = None
            event_key = row["key"] if row is not None else "?"
            event_title = row["title"] if row is not None else event_key
        context = StepContext(
            event_key=event_key,
            event_title=event_title,
            phase_key=step["phase"],
            phase_label=_phase_label(step["phase"], phase),
            step_index=int(step["seq"]),
            step_label=step["label"],
            scope=run["scope"],
            rehearsal=bool(run["rehearsal"]),
            starts_at=run["scheduled_for"],
        )
        cache[key] = context
        if len(cache) > cache_size:
            cache.popitem(last=False)
        return context

    return describe


def _phase_label(key: str, phase: PhaseDefinition | None) -> str:
    if key == REMINDERS_PHASE:
        return "Reminders"
    return phase.label if phase else key


# ── Added for the bot (issue 5): reads the Discord front end needs ────────────


async def current_definition(
    engine: AsyncEngine, key: str, versions: catalog.VersionCache
) -> catalog.CurrentDefinition:
    """The published definition ``/event start`` preflights; raises ``UnknownDefinition``."""
    async with engine.connect() as conn:
        return await catalog.current(conn, key, versions)


async def latest_log_id(engine: AsyncEngine) -> int:
    """Where a reader of the run log starts when it only wants what happens from now on."""
    async with engine.connect() as conn:
        return await run_log.latest_id(conn)


async def log_after(engine: AsyncEngine, last_id: int, *, limit: int = 100) -> Sequence[history.Entry]:
    """Run-log lines written after ``last_id``, oldest first (the staff-log poster's feed)."""
    async with engine.connect() as conn:
        return await history.entries_after(conn, last_id, limit)


# ── Reminders (issue 11): shown beside a run's phases, never as one of them ─────


@dataclass(frozen=True)
class ReminderView:
    id: int
    seq: int
    label: str
    # When it is (or was) due, naive UTC.
    due_at: dt.datetime | None
    # pending, running (being sent), done (sent), skipped (late, or the event started first),
    # failed, cancelled (with its run).
    status: str
    attempts: int
    last_error: str | None
    note: str | None


async def reminders_of_run(engine: AsyncEngine, run_id: int) -> list[ReminderView]:
    """A run's reminders, in the definition's order (none for a manual start or a rehearsal)."""
    async with engine.connect() as conn:
        rows = await reminders_sql.of_run(conn, run_id)
    return [
        ReminderView(
            r.id,
            r.seq,
            r.label or f"reminder {r.seq + 1}",
            r.due_at,
            r.status,
            r.attempts,
            r.last_error,
            r.note,
        )
        for r in rows
    ]
