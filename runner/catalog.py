"""Published definitions and the runs created from them.

Publishing stores an immutable version (or nothing, for content identical to the latest); a run
pins the version it was created from, and its first phase's steps are created with it, in one
transaction, so a run never exists without the steps it starts with.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import definitions as defs
from runner import history, lifecycle, occurrence_moves, reminder_rules, schedule
from runner.db import retry_on_conflict
from runner.definitions import REHEARSAL_KEY_PREFIX, EventDefinition
from runner.errors import UnknownDefinition, UnreadableDefinition
from runner.records import RunRecord, StepRecord
from runner.sql import definitions as definitions_sql
from runner.sql import reminders as reminders_sql
from runner.sql import run_occurrences
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import RunStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Published:
    key: str
    definition_id: int
    version_id: int
    version: int
    changed: bool


@retry_on_conflict
async def publish(
    engine: AsyncEngine,
    definition: EventDefinition,
    now: dt.datetime,
    *,
    source: str | None = None,
    actor: history.Actor | None = None,
) -> Published:
    """Store ``definition`` (already validated) as a new immutable version.

    Identical content to the latest version is a no-op. The caller validates first
    (``definitions.validate``), so nothing invalid ever reaches this table. ``actor``: a name
    (the command line's) or, from Discord, the member, whose id the history keeps with it.

    One transaction, retried when it loses a conflict: it re-points the occurrences not yet
    started, rows a runner on another Galera node may be writing at the same moment.
    """
    content_hash = definition.content_hash()
    async with engine.begin() as conn:
        row = await definitions_sql.by_key(conn, definition.key)
        if row is None:
            definition_id = await definitions_sql.insert_definition(
                conn,
                key=definition.key,
                title=definition.title,
                grace_seconds=definition.grace_seconds,
                now=now,
            )
            latest = None
        else:
            definition_id = int(row["id"])
            latest = await definitions_sql.latest_version(conn, definition_id)
        if latest is not None and latest["content_hash"] == content_hash:
            return Published(
                definition.key, definition_id, int(latest["id"]), int(latest["version"]), changed=False
            )
        number = 1 if latest is None else int(latest["version"]) + 1
        version_id = await definitions_sql.insert_version(
            conn,
            definition_id=definition_id,
            number=number,
            content_hash=content_hash,
            spec=definition.model_dump(mode="json"),
            source=source,
            published_by=stored_name(actor),
            now=now,
        )
        await definitions_sql.point_at_version(
            conn,
            definition_id,
            version_id,
            title=definition.title,
            grace_seconds=definition.grace_seconds,
            now=now,
        )
        if latest is not None:
            current_definition = CurrentDefinition(definition_id, version_id, definition)
            await _follow_new_version(conn, current_definition, number, now, actor)
    return Published(definition.key, definition_id, version_id, number, changed=True)


async def _follow_new_version(
    conn: AsyncConnection,
    current_definition: CurrentDefinition,
    number: int,
    now: dt.datetime,
    actor: history.Actor | None,
) -> None:
    """In the publishing transaction: the definition's occurrences not yet started follow the
    new version (what players were told, the reminders and the Discord listing all read the
    run's version). One the new schedule no longer has is cancelled, saying why; the others are
    re-pointed, with their never-claimed steps and reminders rebuilt from the new version."""
    definition = current_definition.definition
    scopes = set(definition.run_scopes())
    for run in await run_occurrences.upcoming_of_definition(conn, current_definition.definition_id, now):
        moment = run.occurrence_at or run.scheduled_for
        start = schedule.start_of(definition, moment) if run.scope in scopes else None
        if start is None:
            await lifecycle.move_run(
                conn,
                run.id,
                RunStatus.SCHEDULED,
                RunStatus.CANCELLED,
                now,
                actor=actor,
                last_error=f"cancelled: not an occurrence of version {number} of the event",
                cancel_open=True,
                reason=f"version {number} no longer has this occurrence",
            )
            continue
        if start != run.scheduled_for:
            # A moved date (or a move taken back): the run already booked follows, keeping its
            # sign-ups, and its reminders are rebuilt for the new start by ``_repoint``.
            run = await occurrence_moves.reschedule(conn, run, start, number, now, actor)
        await _repoint(conn, current_definition, run, number, now)


async def _repoint(
    conn: AsyncConnection,
    current_definition: CurrentDefinition,
    run: RunRecord,
    number: int,
    now: dt.datetime,
) -> None:
    definition = current_definition.definition
    # The run row first, then its steps: the order every runner locks them in.
    key = definition.concurrency_key_for(run.scope)
    version_id = current_definition.version_id
    if not await run_occurrences.repoint(conn, run.id, version_id, key, run.scheduled_for, now):
        return
    await reminders_sql.drop_unclaimed(conn, run.id)
    first = definition.phases[0]
    await steps_sql.materialise_phase(conn, run.id, first.key, phase_step_specs(first), now)
    await reminders_sql.materialise(conn, run.id, definition, run.scheduled_for, now)
    # A reminder out for delivery when this was published is left to its runner; one handed
    # back since, whose slot the new version lacks, is dropped as republished.
    gone = await reminders_sql.pending_beyond(conn, run.id, len(definition.reminders))
    for step_id in await reminders_sql.skip(conn, gone, "the event was republished without it", now):
        await history.record(
            conn, run.id, history.ReminderSkipped(history.ReminderSkip.REPUBLISHED), now, step_id=step_id
        )
    following = await reminders_sql.next_pending_due(conn, run.id)
    if following is not None and following < run.scheduled_for:
        await run_occurrences.repoint(conn, run.id, version_id, key, following, now)
    moved = history.RunRepointed(run.version_id, current_definition.version_id, number)
    await history.record(conn, run.id, moved, now)


class VersionCache:
    """Parsed definitions by version id. Versions are immutable, so caching them is safe in any
    number of processes.

    A stored version today's rules refuse (written under older rules, or edited by hand) raises
    ``UnreadableDefinition`` with the reason, and is logged once per process. It is not cached:
    a row repaired by hand is read again at the next use."""

    def __init__(self) -> None:
        self._by_version: dict[int, EventDefinition] = {}
        self._logged: dict[int, str] = {}

    def cached(self, version_id: int) -> EventDefinition | None:
        """The parsed version if this process already read it (no query)."""
        return self._by_version.get(version_id)

    async def get(self, conn: AsyncConnection, version_id: int) -> EventDefinition:
        cached = self._by_version.get(version_id)
        if cached is not None:
            return cached
        row = await definitions_sql.version(conn, version_id)
        if row is None:
            raise LookupError(f"version {version_id} does not exist")
        spec = row["spec"]
        try:
            cached = defs.from_spec(spec)
        except (ValueError, TypeError) as exc:
            raise self._unreadable(version_id, row, spec, exc) from None
        self._by_version[version_id] = cached
        return cached

    def _unreadable(self, version_id: int, row: Any, spec: Any, exc: Exception) -> UnreadableDefinition:
        key = spec.get("key") if isinstance(spec, dict) and isinstance(spec.get("key"), str) else None
        error = UnreadableDefinition(
            version_id, _reason(exc), key=key and key[:64], version=int(row["version"])
        )
        if self._logged.get(version_id) != error.reason:
            self._logged[version_id] = error.reason
            log.warning("%s (version id %s)", error.message, version_id, extra={"version_id": version_id})
        return error


def _reason(exc: Exception) -> str:
    """Where and why, in one short line: the first few of pydantic's errors, located."""
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in err['loc']) or 'definition'}: {err['msg']}"
            for err in exc.errors()[:3]
        ]
        more = len(exc.errors()) - len(parts)
        text = "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
    else:
        text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:299] + "…"


@dataclass(frozen=True)
class CurrentDefinition:
    definition_id: int
    version_id: int
    definition: EventDefinition


async def current(conn: AsyncConnection, key: str, cache: VersionCache) -> CurrentDefinition:
    row = await definitions_sql.by_key(conn, key)
    if row is None or row["current_version_id"] is None:
        raise UnknownDefinition(f"no published event is called {key!r}")
    version_id = int(row["current_version_id"])
    return CurrentDefinition(int(row["id"]), version_id, await cache.get(conn, version_id))


async def create_run(
    conn: AsyncConnection,
    current_definition: CurrentDefinition,
    scope: str,
    scheduled_for: dt.datetime,
    now: dt.datetime,
    *,
    actor: history.Actor | None = None,
    rehearsal: bool = False,
    manual: bool = False,
    occurrence: dt.datetime | None = None,
) -> int | None:
    """One occurrence with its first phase's steps (and, for a scheduled occurrence, its
    reminders); ``None`` if the occurrence already exists. A ``manual`` start is no occurrence
    of the schedule: it holds no occurrence key, so it is always created (the caller refuses a
    second start of a scope in flight), and it has no reminders, nor has a rehearsal."""
    definition = current_definition.definition
    key = definition.concurrency_key_for(scope)
    if rehearsal and key:
        # A rehearsal must never hold (or wait on) the key of the live event it imitates.
        key = REHEARSAL_KEY_PREFIX + key
    reminded = bool(definition.reminders) and not (manual or rehearsal)
    run_id = await runs_sql.insert(
        conn,
        definition_id=current_definition.definition_id,
        version_id=current_definition.version_id,
        scope=scope,
        scheduled_for=scheduled_for,
        concurrency_key=key,
        now=now,
        rehearsal=rehearsal,
        started_by=stored_name(actor),
        manual=manual,
        # The one due query finds the run at its first reminder: no per-tick scan of reminders.
        wake_at=reminder_rules.earliest_due(definition, scheduled_for) if reminded else None,
        occurrence_at=occurrence,
    )
    if run_id is None:
        return None
    first = definition.phases[0]
    await steps_sql.materialise_phase(conn, run_id, first.key, phase_step_specs(first), now)
    if reminded:
        await reminders_sql.materialise(conn, run_id, definition, scheduled_for, now)
    await _record_created(conn, run_id, current_definition, scope, scheduled_for, now, actor, rehearsal)
    return run_id


async def _record_created(
    conn: AsyncConnection,
    run_id: int,
    current_definition: CurrentDefinition,
    scope: str,
    scheduled_for: dt.datetime,
    now: dt.datetime,
    actor: history.Actor | None,
    rehearsal: bool,
) -> None:
    """The run's ``run.created`` line, however it was created."""
    created = history.RunCreated(
        definition=current_definition.definition.key,
        version_id=current_definition.version_id,
        scope=scope,
        scheduled_for=scheduled_for,
        rehearsal=rehearsal,
    )
    await history.record(conn, run_id, created, now, actor=actor)


@dataclass(frozen=True)
class StartedHere:
    """A run created under a ``Handover``: what its creating transaction wrote, so the runner
    that drives it need not read it back."""

    run: RunRecord
    steps: list[StepRecord]


def can_start_here(current_definition: CurrentDefinition, scope: str) -> bool:
    """A start may be handed over unless the run holds a concurrency key (it must take its slot,
    or wait for it, through ``scheduled -> starting``) or its first phase has no steps."""
    definition = current_definition.definition
    return definition.concurrency_key_for(scope) is None and bool(definition.phases[0].steps)


async def create_run_started_here(
    conn: AsyncConnection,
    current_definition: CurrentDefinition,
    scope: str,
    now: dt.datetime,
    handover: lifecycle.Handover,
    *,
    actor: history.Actor | None = None,
    rehearsal: bool = False,
) -> StartedHere:
    """A manual start created ``running``, leased and with its first step claimed (see
    ``can_start_here``): one transaction of four statements, and the first action can go."""
    definition = current_definition.definition
    first = definition.phases[0]
    run = await runs_sql.insert_leased(
        conn,
        definition_id=current_definition.definition_id,
        version_id=current_definition.version_id,
        scope=scope,
        phase=first.key,
        owner=handover.owner,
        lease_until=handover.run_lease_until,
        now=now,
        rehearsal=rehearsal,
        started_by=stored_name(actor),
    )
    steps = await steps_sql.materialise_claiming_first(
        conn,
        run.id,
        first.key,
        phase_step_specs(first),
        now,
        owner=handover.owner,
        lease_until=handover.step_lease_until,
        action_version=handover.action_version,
    )
    await _record_created(conn, run.id, current_definition, scope, now, now, actor, rehearsal)
    await lifecycle.record_born_running(conn, run.id, first.key, now)
    return StartedHere(run, steps)


def stored_name(actor: history.Actor | None) -> str | None:
    """The name the runs table keeps in ``started_by``; the run's ``run.created`` line keeps
    the actor itself, id included, and is what front ends read."""
    return actor.name[:100] if actor is not None else None


def phase_step_specs(phase: defs.PhaseDefinition) -> list[steps_sql.StepSpec]:
    return [
        steps_sql.StepSpec(action_id=s.action, params=dict(s.params), on_failure=s.on_failure, label=s.label)
        for s in phase.steps
    ]
