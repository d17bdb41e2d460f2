"""``health``: is the runner doing its job? What ``python -m bot health`` and ``/event health``
show, each front end adding what only it knows (the bot: Discord's latency and its permissions).

* **The database**: reachable, at the schema this code needs, and how long a trivial query takes
  (the median of a few round trips on one open connection, so the figure is the database's and
  the network's, not the pool's connect).
* **The processes**: every serving process's heartbeat (``runner.heartbeat``): alive or not by
  its own interval, its tick lag and longest tick, and what it holds (the runs and steps under a
  live lease carrying its owner string). Leases held by an owner with no heartbeat (a process of
  an older version, a command-line tool) are listed apart.
* **The runs**: those in flight that are degraded or stalled, and those **due but not picked up**:
  a wake in the past, beyond a tolerance, that no live lease holds. That is tick lag seen from the
  runs' side, independent of any one process: it grows when every process is down, wedged or too
  far behind, whatever their heartbeats claim.

``problems`` are what makes the answer unhealthy; ``warnings`` are worth a look but leave it
healthy (a degraded run carries on; a process that died is taken over when its leases run out).
"""

from __future__ import annotations

import datetime as dt
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner.db import DATABASE_ERRORS
from runner.heartbeat import dead_after
from runner.migrate import alembic_config, current_revision
from runner.sql import health_reads
from runner.sql import processes as processes_sql
from runner.states import Health, RunStatus

# Round trips timed for the latency figure (the median is reported).
LATENCY_SAMPLES = 3
# The most runs listed of each kind; the rest are counted.
LISTED_RUNS = 50
# A tick that starts this much later than it was due (and at least one interval late) is a
# process failing to keep time.
LAG_FLOOR_SECONDS = 5.0
# A run due and not picked up within this many tick intervals (and at least the floor) is overdue.
OVERDUE_INTERVALS = 3
OVERDUE_FLOOR_SECONDS = 30.0


@dataclass(frozen=True)
class DatabaseHealth:
    reachable: bool
    backend: str
    # The median round trip of ``SELECT 1``, in milliseconds (None when unreachable).
    latency_ms: float | None = None
    # Why it could not be reached (the error's class and message; never the URL).
    error: str | None = None
    schema: str | None = None
    head: str | None = None

    @property
    def schema_current(self) -> bool:
        return self.schema == self.head


@dataclass(frozen=True)
class HeldStep:
    run_id: int
    step_id: int


@dataclass(frozen=True)
class ProcessHealth:
    owner: str
    host: str
    pid: int
    started_at: dt.datetime
    last_seen: dt.datetime
    interval_seconds: float
    last_tick_at: dt.datetime | None
    # See ``runner.heartbeat``: the most a tick started late since the beat before, and the
    # longest tick meanwhile.
    tick_lag_seconds: float | None
    tick_seconds: float | None
    alive: bool
    runs: list[int] = field(default_factory=list)
    steps: list[HeldStep] = field(default_factory=list)

    @property
    def lagging(self) -> bool:
        lag = self.tick_lag_seconds
        return self.alive and lag is not None and lag > max(self.interval_seconds, LAG_FLOOR_SECONDS)

    def seen_ago(self, now: dt.datetime) -> float:
        return max((now - self.last_seen).total_seconds(), 0.0)


@dataclass(frozen=True)
class Holder:
    """Leases held by an owner that has no heartbeat row."""

    owner: str
    runs: list[int]
    steps: list[HeldStep]


@dataclass(frozen=True)
class RunHealth:
    id: int
    definition_key: str
    title: str
    scope: str
    status: RunStatus
    health: Health
    rehearsal: bool
    wake_at: dt.datetime | None
    last_error: str | None


@dataclass(frozen=True)
class HealthReport:
    checked_at: dt.datetime
    database: DatabaseHealth
    processes: list[ProcessHealth] = field(default_factory=list)
    other_holders: list[Holder] = field(default_factory=list)
    # Degraded or stalled runs in flight, stalled first (at most ``LISTED_RUNS``), and how many.
    unwell: list[RunHealth] = field(default_factory=list)
    unwell_total: int = 0
    # Runs due longer than ``overdue_after_seconds`` ago that nobody holds, oldest first.
    overdue: list[RunHealth] = field(default_factory=list)
    overdue_total: int = 0
    overdue_after_seconds: float = OVERDUE_FLOOR_SECONDS

    @property
    def live(self) -> list[ProcessHealth]:
        return [p for p in self.processes if p.alive]

    @property
    def stalled(self) -> list[RunHealth]:
        return [r for r in self.unwell if r.health == Health.STALLED]

    @property
    def oldest_overdue_seconds(self) -> float | None:
        wakes = [r.wake_at for r in self.overdue if r.wake_at is not None]
        return (self.checked_at - min(wakes)).total_seconds() if wakes else None

    @property
    def problems(self) -> list[str]:
        """What makes this unhealthy, each in one sentence saying what to do."""
        database = self.database
        if not database.reachable:
            return [f"the database cannot be reached: {database.error}"]
        if not database.schema_current:
            return [
                f"the database is at schema {database.schema or 'none'}, this code needs {database.head}: "
                "run python -m bot migrate"
            ]
        found: list[str] = []
        if not self.live:
            found.append(
                "no bot process is running: none has written a heartbeat lately (start it with python -m bot run)"
            )
        for process in self.processes:
            if process.lagging:
                found.append(
                    f"process {process.owner} ticks late: a tick started {duration_text(process.tick_lag_seconds)} "
                    "after it was due (is its host overloaded, or its event loop blocked?)"
                )
        stalled = sum(r.health == Health.STALLED for r in self.unwell)
        if stalled:
            found.append(
                f"{_count(stalled, 'run')} stalled: nobody has advanced "
                f"{'it' if stalled == 1 else 'them'} when due"
            )
        if self.overdue_total:
            found.append(
                f"{_count(self.overdue_total, 'run')} due but not picked up, the oldest for "
                f"{duration_text(self.oldest_overdue_seconds)} (is every bot process down or behind?)"
            )
        return found

    @property
    def warnings(self) -> list[str]:
        """Worth a look, but not unhealthy."""
        if not self.database.reachable or not self.database.schema_current:
            return []
        found: list[str] = []
        dead = [p for p in self.processes if not p.alive]
        if len(dead) == 1:
            (process,) = dead
            found.append(
                f"process {process.owner} on {process.host} has not been seen for "
                f"{duration_text(process.seen_ago(self.checked_at))}: it stopped without closing, or hangs"
            )
        elif dead:
            # One line for them all: a crash loop leaves a row per restart.
            longest = max(p.seen_ago(self.checked_at) for p in dead)
            found.append(
                f"{len(dead)} processes have not been seen for a while (up to {duration_text(longest)}): "
                "they stopped without closing, or hang"
            )
        degraded = self.unwell_total - sum(r.health == Health.STALLED for r in self.unwell)
        if degraded > 0:
            found.append(
                f"{_count(degraded, 'run')} degraded: a step failed or was retried, and the run carried on"
            )
        return found

    @property
    def healthy(self) -> bool:
        return not self.problems


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def duration_text(value: float | None) -> str:
    """A duration as people read it: ``850 ms``, ``12 s``, ``4 min``, ``2 h``."""
    if value is None:
        return "?"
    if value < 1:
        return f"{round(value * 1000)} ms"
    if value < 120:
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.0f} h"


def overdue_after(interval_seconds: float) -> float:
    """How long past its wake a run nobody holds may wait before it counts as not picked up."""
    return max(OVERDUE_INTERVALS * interval_seconds, OVERDUE_FLOOR_SECONDS)


@functools.cache
def schema_head() -> str | None:
    """The newest migration this code has (read from the scripts once: it cannot change while
    the process runs, and reading them costs tens of milliseconds)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def _latency_ms(conn: AsyncConnection, counter: Callable[[], float]) -> float:
    samples = []
    for _ in range(LATENCY_SAMPLES):
        began = counter()
        await conn.execute(sa.text("SELECT 1"))
        samples.append((counter() - began) * 1000)
    return statistics.median(samples)


async def health(
    engine: AsyncEngine,
    now: dt.datetime,
    *,
    interval_seconds: float,
    counter: Callable[[], float] = time.perf_counter,
) -> HealthReport:
    """Everything the runner can say about its own health at ``now``. ``interval_seconds`` is the
    tick interval the config sets (how soon a due run should be picked up). A database that
    cannot be reached is an answer, not an error."""
    backend = engine.url.get_backend_name()
    head = schema_head()
    try:
        async with engine.connect() as conn:
            latency = await _latency_ms(conn, counter)
        schema = await current_revision(engine)
    except DATABASE_ERRORS as exc:
        reason = getattr(exc, "orig", None) or exc
        return HealthReport(now, DatabaseHealth(False, backend, error=f"{type(reason).__name__}: {reason}"))
    database = DatabaseHealth(True, backend, latency_ms=latency, schema=schema, head=head)
    if not database.schema_current:
        return HealthReport(now, database)
    tolerance = overdue_after(interval_seconds)
    async with engine.connect() as conn:
        rows = await processes_sql.every(conn)
        run_leases = await health_reads.run_leases(conn, now)
        step_leases = await health_reads.step_leases(conn, now)
        unwell, unwell_total = await health_reads.unwell_runs(conn, LISTED_RUNS)
        before = now - dt.timedelta(seconds=tolerance)
        overdue = await health_reads.overdue_wakes(conn, now, before, LISTED_RUNS)
        overdue_total = (
            len(overdue)
            if len(overdue) < LISTED_RUNS
            else await health_reads.count_overdue_wakes(conn, now, before)
        )
    held_runs: dict[str, list[int]] = {}
    for lease in run_leases:
        held_runs.setdefault(lease["owner"], []).append(int(lease["run_id"]))
    held_steps: dict[str, list[HeldStep]] = {}
    for lease in step_leases:
        held_steps.setdefault(lease["owner"], []).append(
            HeldStep(int(lease["run_id"]), int(lease["step_id"]))
        )
    processes = [_process(row, now, held_runs, held_steps) for row in rows]
    known = {p.owner for p in processes}
    others = sorted((set(held_runs) | set(held_steps)) - known)
    return HealthReport(
        checked_at=now,
        database=database,
        processes=processes,
        other_holders=[Holder(o, held_runs.get(o, []), held_steps.get(o, [])) for o in others],
        unwell=[_run(row) for row in unwell],
        unwell_total=unwell_total,
        overdue=[_run(row) for row in overdue],
        overdue_total=overdue_total,
        overdue_after_seconds=tolerance,
    )


def _process(
    row: sa.RowMapping,
    now: dt.datetime,
    held_runs: dict[str, list[int]],
    held_steps: dict[str, list[HeldStep]],
) -> ProcessHealth:
    interval = row["interval_ms"] / 1000
    owner = row["owner"]
    return ProcessHealth(
        owner=owner,
        host=row["host"],
        pid=int(row["pid"]),
        started_at=row["started_at"],
        last_seen=row["last_seen"],
        interval_seconds=interval,
        last_tick_at=row["last_tick_at"],
        tick_lag_seconds=None if row["tick_lag_ms"] is None else row["tick_lag_ms"] / 1000,
        tick_seconds=None if row["tick_ms"] is None else row["tick_ms"] / 1000,
        alive=now - row["last_seen"] <= dead_after(interval),
        runs=held_runs.get(owner, []),
        steps=held_steps.get(owner, []),
    )


def _run(row: sa.RowMapping) -> RunHealth:
    return RunHealth(
        id=int(row["id"]),
        definition_key=row["definition_key"],
        title=row["title"],
        scope=row["scope"],
        status=RunStatus(row["status"]),
        health=Health(row["health"]),
        rehearsal=bool(row["rehearsal"]),
        wake_at=row["wake_at"],
        last_error=row["last_error"],
    )


def worst_first(processes: Sequence[ProcessHealth]) -> list[ProcessHealth]:
    """Live processes first (those that lag first among them), then the dead, newest first."""
    return sorted(processes, key=lambda p: (not p.alive, not p.lagging, -p.last_seen.timestamp()))
