"""Read-only projections for front ends: a run's status, lists of runs, a step's context.

Front ends render these; they never query the tables themselves.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.schema import RUN_IN_FLIGHT
from runner.sql import definitions as definitions_sql
from runner.sql import run_log
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql


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
    settled_by: str | None
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
    started_by: str | None
    last_error: str | None
    version_id: int
    phases: list[PhaseView] = field(default_factory=list)

    @property
    def in_flight(self) -> bool:
        return self.status in RUN_IN_FLIGHT

    def open_steps(self) -> list[StepView]:
        return [
            s for p in self.phases for s in p.steps if s.id is not None and s.status in ("pending", "running")
        ]


def _label(step_label: str | None, action_id: str) -> str:
    return step_label or action_id


async def run_view(engine: AsyncEngine, run_id: int, versions: catalog.VersionCache) -> RunView | None:
    async with engine.connect() as conn:
        run = await runs_sql.get(conn, run_id)
        if run is None:
            return None
        definition_row = await definitions_sql.by_id(conn, int(run["definition_id"]))
        definition = await versions.get(conn, int(run["version_id"]))
        step_rows = await steps_sql.list_for_run(conn, run_id)
    by_slot = {(s["phase"], int(s["seq"])): s for s in step_rows}
    phases = []
    for phase in definition.phases:
        step_views = []
        for seq, spec in enumerate(phase.steps):
            row = by_slot.get((phase.key, seq))
            if row is None:
                step_views.append(
                    StepView(
                        None,
                        phase.key,
                        seq,
                        _label(spec.label, spec.action),
                        spec.action,
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
                    id=int(row["id"]),
                    phase=phase.key,
                    seq=seq,
                    label=_label(row["label"], row["action_id"]),
                    action_id=row["action_id"],
                    status=row["status"],
                    parked=row["status"] == "running" and row["claim_expires_at"] is None,
                    due_at=row["due_at"],
                    attempts=int(row["attempts"]),
                    last_error=row["last_error"],
                    settled_by=row["settled_by"],
                    result=row["result"],
                )
            )
        phases.append(PhaseView(phase.key, phase.label, phase.key == run["current_phase"], step_views))
    return RunView(
        id=run_id,
        definition_key=definition_row["key"] if definition_row else definition.key,
        title=definition.title,
        scope=run["scope"],
        status=run["status"],
        health=run["health"],
        rehearsal=bool(run["rehearsal"]),
        current_phase=run["current_phase"],
        scheduled_for=run["scheduled_for"],
        started_at=run["started_at"],
        ended_at=run["ended_at"],
        started_by=run["started_by"],
        last_error=run["last_error"],
        version_id=int(run["version_id"]),
        phases=phases,
    )


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


async def list_runs(
    engine: AsyncEngine, *, in_flight_only: bool = False, limit: int = 50
) -> list[RunSummary]:
    async with engine.connect() as conn:
        rows = await runs_sql.list_runs(conn, statuses=RUN_IN_FLIGHT if in_flight_only else None, limit=limit)
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
        )
        for r in rows
    ]


@dataclass(frozen=True)
class DefinitionSummary:
    key: str
    title: str
    version: int
    scopes: list[str]
    schedule: str


async def list_definitions(engine: AsyncEngine) -> list[DefinitionSummary]:
    async with engine.connect() as conn:
        rows = await definitions_sql.list_all(conn)
    summaries = []
    for row in rows:
        spec = row["spec"] or {}
        schedule = spec.get("schedule", {}) or {}
        kind = schedule.get("kind", "manual")
        text = {
            "manual": "manual",
            "once": f"once at {schedule.get('at')}",
            "cron": f"cron {schedule.get('cron')} ({schedule.get('timezone')})",
        }.get(kind, kind)
        summaries.append(
            DefinitionSummary(
                row["key"], row["title"], int(row["version"]), list(spec.get("scopes") or []), text
            )
        )
    return summaries


async def log_for_run(engine: AsyncEngine, run_id: int) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        return [dict(r) for r in await run_log.for_run(conn, run_id)]


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
            definition = await versions.get(conn, int(run["version_id"]))
        phase = definition.phase(step["phase"])
        context = StepContext(
            event_key=definition.key,
            event_title=definition.title,
            phase_key=step["phase"],
            phase_label=phase.label if phase else step["phase"],
            step_index=int(step["seq"]),
            step_label=step["label"],
            scope=run["scope"],
            rehearsal=bool(run["rehearsal"]),
        )
        cache[key] = context
        if len(cache) > cache_size:
            cache.popitem(last=False)
        return context

    return describe


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


async def log_after(engine: AsyncEngine, last_id: int, *, limit: int = 100) -> list[dict[str, Any]]:
    """Run-log lines written after ``last_id``, oldest first (the staff-log poster's feed)."""
    async with engine.connect() as conn:
        return [dict(r) for r in await run_log.after(conn, last_id, limit)]
