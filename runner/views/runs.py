"""A run as front ends show it: its status with every phase and step, the list of runs,
and its reminders (beside its phases, never one of them).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog, history
from runner.definitions import REMINDERS_PHASE, EventDefinition
from runner.errors import UnreadableDefinition
from runner.history import Actor
from runner.records import StepRecord
from runner.sql import definitions as definitions_sql
from runner.sql import reminders as reminders_sql
from runner.sql import retention as retention_sql
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import RUN_IN_FLIGHT, STEP_OPEN, CleanupStatus, Health, RunStatus, StepStatus
from runner.views.cleanup import CleanupView, cleanup_view
from runner.views.definitions import unreadable_versions


class Unreached(enum.StrEnum):
    """The status shown for a step of the definition that has no row yet (its phase was not
    entered): no step status, since no step is stored."""

    NOT_REACHED = "not reached"


@dataclass(frozen=True)
class StepView:
    id: int | None
    phase: str
    seq: int
    label: str
    action_id: str
    status: StepStatus | Unreached
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
class PrunedRun:
    """What is kept of a run whose steps and history retention pruned: how its steps and its
    reminders ended (status -> how many) and how many log lines it had. ``done`` is False while
    its rows are still being deleted (its steps are then shown no more either)."""

    steps: dict[str, int]
    reminders: dict[str, int]
    log_lines: int
    done: bool


@dataclass(frozen=True)
class RunView:
    id: int
    definition_key: str
    title: str
    scope: str
    status: RunStatus
    health: Health
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
    # Set when retention pruned the run's steps and history: ``phases`` is then empty (its
    # steps are gone; every one would read "not reached"), and this says how they ended.
    pruned: PrunedRun | None = None
    # The cleanup ledger's state (what a cancel with cleanup undid, or would), when it has any.
    cleanup: CleanupView | None = None

    @property
    def in_flight(self) -> bool:
        return self.status in RUN_IN_FLIGHT

    def open_steps(self) -> list[StepView]:
        return [s for p in self.phases for s in p.steps if s.id is not None and s.status in STEP_OPEN]


def step_name(step_id: int | None, label: str | None = None) -> str:
    """How every front end names a step to a person: by its id, the number ``/event skip`` and
    the cue card's footer use too, with its label where it has one (``step 5 (Open the gates)``).
    One numbering only: a step's place in its phase is never shown as a number, because two
    numbers for one step in consecutive lines read as two steps."""
    if step_id is None:
        return f"a step ({label})" if label else "a step"
    return f"step {step_id} ({label})" if label else f"step {step_id}"


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
        kept = await retention_sql.summary_of(conn, run_id)
        if kept is not None:
            return _pruned_view(run, definition_row, definition, unreadable, kept)
        step_records = await steps_sql.list_for_run(conn, run_id)
        started_by = _started_by(await history.entries_for_run(conn, run_id), run["started_by"])
        # Read only once a cancel asked for a cleanup: a run view is read for every staff-log
        # line, and the ledger of a run nobody cancelled is nothing staff need yet.
        cleanup = (
            await cleanup_view(conn, run_id, run["cleanup_status"])
            if run["cleanup_status"] != CleanupStatus.NOT_REQUIRED
            else None
        )
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
                        Unreached.NOT_REACHED,
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
    key, title = _names(run, definition_row, definition)
    view = _from_row(run, key, title, started_by, unreadable, phases=phases)
    return dataclasses.replace(view, cleanup=cleanup) if cleanup is not None else view


def _names(run: Any, definition_row: Any, definition: EventDefinition | None) -> tuple[str, str]:
    """The run's event key and title: the version's when it can be read, else the definition
    row's, else a stand-in that still names the run."""
    key = definition_row["key"] if definition_row is not None else definition.key if definition else "?"
    if definition is not None:
        return key, definition.title
    return key, definition_row["title"] if definition_row is not None else f"run {run['id']}"


def _from_row(
    run: Any,
    key: str,
    title: str,
    started_by: Actor | None,
    unreadable: str | None,
    *,
    phases: list[PhaseView] | None = None,
    pruned: PrunedRun | None = None,
) -> RunView:
    """The view of a run's row, with what was read beside it (its steps, or its summary)."""
    return RunView(
        id=int(run["id"]),
        definition_key=key,
        title=title,
        scope=run["scope"],
        status=RunStatus(run["status"]),
        health=Health(run["health"]),
        rehearsal=bool(run["rehearsal"]),
        current_phase=run["current_phase"],
        scheduled_for=run["scheduled_for"],
        started_at=run["started_at"],
        ended_at=run["ended_at"],
        started_by=started_by,
        last_error=run["last_error"],
        version_id=int(run["version_id"]),
        phases=phases or [],
        unreadable=unreadable,
        pruned=pruned,
    )


def _pruned_view(
    run: Any,
    definition_row: Any,
    definition: EventDefinition | None,
    unreadable: str | None,
    kept: Any,
) -> RunView:
    """A run whose steps and history retention pruned: its row, and the summary kept of it."""
    key, title = _names(run, definition_row, definition)
    name = kept["started_by_name"]
    started_by = None if name is None else Actor(kept["started_by_id"], str(name))
    return _from_row(
        run,
        key,
        title,
        started_by,
        unreadable,
        pruned=PrunedRun(
            steps=dict(kept["steps"] or {}),
            reminders=dict(kept["reminders"] or {}),
            log_lines=int(kept["log_lines"]),
            done=kept["pruned_at"] is not None,
        ),
    )


def _started_by(entries: Sequence[history.Entry], stored: str | None) -> Actor | None:
    """Who started the run, as its history says (the ``run.created`` line keeps the actor with
    its id); the runs table's name for a run whose line is gone."""
    created = next((e for e in entries if isinstance(e.event, history.RunCreated)), None)
    if created is not None and created.actor is not None:
        return created.actor
    # A name with no id (the schedule, the command line, a rehearsal, a script).
    return None if stored is None else Actor(None, stored)


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
    status: RunStatus
    health: Health
    rehearsal: bool
    scheduled_for: dt.datetime
    current_phase: str | None
    last_error: str | None
    # Why the run's definition version cannot be read, if it cannot (the runner leaves it alone).
    unreadable: str | None = None
    cleanup_status: CleanupStatus = CleanupStatus.NOT_REQUIRED


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
        unreadable = await unreadable_versions(conn, versions, {int(r["version_id"]) for r in rows})
    return [
        RunSummary(
            id=int(r["id"]),
            definition_key=r["definition_key"],
            title=r["definition_title"],
            scope=r["scope"],
            status=RunStatus(r["status"]),
            health=Health(r["health"]),
            rehearsal=bool(r["rehearsal"]),
            scheduled_for=r["scheduled_for"],
            current_phase=r["current_phase"],
            last_error=r["last_error"],
            unreadable=unreadable.get(int(r["version_id"])),
            cleanup_status=CleanupStatus(r["cleanup_status"]),
        )
        for r in rows
    ]


@dataclass(frozen=True)
class ReminderView:
    id: int
    seq: int
    label: str
    # When it is (or was) due, naive UTC.
    due_at: dt.datetime | None
    # pending, running (being sent), done (sent), skipped (late, or the event started first),
    # failed, cancelled (with its run).
    status: StepStatus
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
