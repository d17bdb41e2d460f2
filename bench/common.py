"""What every benchmark shares: fresh migrated databases on each backend, a statement counter,
bench-only actions, a bulk seeder of dormant runs, and the result rows the table is made of.

Every engine comes from ``runner.db.create_engine`` (the production factory), every schema from
the Alembic migrations (``runner.migrate.upgrade``), so what is measured is what is deployed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import re
import statistics
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner import definitions as defs
from runner.clock import utcnow
from runner.db import create_engine
from runner.migrate import upgrade
from runner.registry import Action, ActionRegistry, Envelope
from runner.schema import run_log, runs, steps
from runner.sql.steps import new_idempotency_key

# ── Options and results ───────────────────────────────────────────────────


@dataclass(frozen=True)
class Options:
    repeats: int = 5
    quick: bool = False


@dataclass
class Result:
    """One line of the table. ``ratio`` is measured against a baseline taken in the same run
    (or against the target itself where the issue names an absolute bound); ``target`` says
    which, in words, and ``passed`` is the verdict."""

    benchmark: str
    backend: str
    measured: str
    baseline: str
    ratio: float | None
    target: str
    passed: bool | None
    details: list[str] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): with 200 samples p99 is the 198th value, so a
    single stray sample cannot hide behind interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


# ── Backends: a fresh migrated database per measurement ───────────────────


class Backend(Protocol):
    name: str

    async def create(self) -> str:
        """The URL of a new, empty, migrated database."""
        ...

    async def drop(self, url: str) -> None: ...

    def close(self) -> None: ...

    def version(self) -> str: ...


class SQLiteBackend:
    name = "sqlite"

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="eventbot-bench-")

    async def create(self) -> str:
        path = Path(self._dir.name) / f"bench-{uuid.uuid4().hex[:10]}.sqlite3"
        url = f"sqlite+aiosqlite:///{path}"
        await _migrate(url)
        return url

    async def drop(self, url: str) -> None:
        await asyncio.to_thread(self._unlink, sa.engine.make_url(url).database or "")

    @staticmethod
    def _unlink(path: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        self._dir.cleanup()

    def version(self) -> str:
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"


class MariaDBBackend:
    """One throwaway ``mariadbd`` for the whole bench run (started here, stopped by ``close``),
    one fresh database per measurement."""

    name = "mariadb"

    def __init__(self) -> None:
        from tests.support.mariadb_server import ThrowawayMariaDB

        self.server = ThrowawayMariaDB(verbose=False)
        self.server.start()

    async def create(self) -> str:
        name = f"bench_{uuid.uuid4().hex[:12]}"
        await asyncio.to_thread(self.server.create_database, name)
        url = self.server.url(name)
        await _migrate(url)
        return url

    async def drop(self, url: str) -> None:
        name = sa.engine.make_url(url).database
        if name:
            await asyncio.to_thread(self.server.drop_database, name)

    def close(self) -> None:
        self.server.stop()

    def version(self) -> str:
        return "MariaDB " + self.server.execute_sql("SELECT VERSION();").strip()

    def status(self) -> dict[str, int]:
        """Server counters: ``Questions`` (statements a client sent, COMMIT and ROLLBACK
        included, pings not; this reading adds one) and ``Rows_read`` (rows the storage
        engine handed up: what a statement examined, not what it matched)."""
        out = self.server.execute_sql("SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Rows_read');")
        return {name: int(value) for name, value in (line.split("\t") for line in out.splitlines())}

    @contextlib.contextmanager
    def slow_log(self) -> Iterator[Path]:
        """Every statement, with its rows examined and the plan it really ran with
        (``log_slow_verbosity=query_plan,explain``), logged while the block runs. The plan
        chosen at run time can differ from what a later EXPLAIN shows (statistics move)."""
        assert self.server.tmpdir is not None
        path = self.server.tmpdir / f"slow-{uuid.uuid4().hex[:8]}.log"
        self.server.execute_sql(
            f"SET GLOBAL slow_query_log_file='{path}'; SET GLOBAL log_slow_verbosity='query_plan,explain'; "
            "SET GLOBAL long_query_time=0; SET GLOBAL slow_query_log=1;"
        )
        try:
            yield path
        finally:
            self.server.execute_sql("SET GLOBAL slow_query_log=0; SET GLOBAL long_query_time=10;")


_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\b\d+(?:\.\d+)?\b")


def slow_log_summary(path: Path, limit: int = 8) -> list[str]:
    """Group a slow log by statement shape (literals replaced by ?): how often each ran, the
    rows it examined (median and worst) and the index its plan used on the first table. The
    ``limit`` shapes that examined the most rows in total come first."""
    text = path.read_text(errors="replace") if path.exists() else ""
    shapes: dict[str, list[tuple[int, str]]] = {}
    for entry in re.split(r"\n(?=# User@Host)", text):
        examined = re.search(r"Rows_examined: (\d+)", entry)
        body = [
            line
            for line in entry.splitlines()
            if line and not line.startswith(("#", "SET timestamp", "use "))
        ]
        if not examined or not body:
            continue
        statement = " ".join(" ".join(body).split())
        if not statement.upper().startswith(("SELECT", "UPDATE", "INSERT", "DELETE")):
            continue
        shape = _LITERAL.sub("?", statement)
        plan = re.search(r"# explain: 1\t\w+\t(\w+)\t(\w+)\t[^\t]*\t(\w+)", entry)
        key = f"{plan.group(1)}:{plan.group(3)} ({plan.group(2)})" if plan else "-"
        shapes.setdefault(shape, []).append((int(examined.group(1)), key))
    lines = []
    for shape, runs_of in sorted(shapes.items(), key=lambda kv: -sum(e for e, _ in kv[1]))[:limit]:
        examined = sorted(e for e, _ in runs_of)
        middle = examined[len(examined) // 2]
        keys = Counter(k for _, k in runs_of).most_common(2)
        lines.append(
            f"  {len(runs_of):5d}x examined median {middle}, max {examined[-1]}; plan {', '.join(f'{k} x{n}' for k, n in keys)}: "
            f"{shape[:150]}"
        )
    return lines


class ServerCounters:
    """Deltas of the MariaDB server's counters over a block (nothing on SQLite)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend if isinstance(backend, MariaDBBackend) else None
        self.delta: dict[str, int] = {}

    def __enter__(self) -> ServerCounters:
        self._before = self.backend.status() if self.backend else {}
        return self

    def __exit__(self, *exc: object) -> None:
        if self.backend:
            after = self.backend.status()
            self.delta = {k: after[k] - self._before[k] for k in after}
            self.delta["Questions"] -= 1  # our own SHOW STATUS

    def per(self, name: str, steps: int) -> float | None:
        return self.delta[name] / steps if name in self.delta else None


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


def make_backend(name: str) -> Backend:
    if name == "sqlite":
        return SQLiteBackend()
    if name == "mariadb":
        return MariaDBBackend()
    raise ValueError(f"unknown backend {name!r}")


@contextlib.asynccontextmanager
async def fresh_database(backend: Backend) -> AsyncIterator[str]:
    url = await backend.create()
    try:
        yield url
    finally:
        await backend.drop(url)


@contextlib.asynccontextmanager
async def fresh_engine(backend: Backend) -> AsyncIterator[AsyncEngine]:
    """A new migrated database and a production engine on it, both gone afterwards."""
    async with fresh_database(backend) as url:
        engine = create_engine(url)
        try:
            yield engine
        finally:
            await engine.dispose()


# ── Counting what is sent to the database ─────────────────────────────────

_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+[`\"]?(\w+)", re.IGNORECASE)


def statement_kind(statement: str) -> str:
    """``UPDATE event_run_steps``, ``SELECT event_runs``, ``BEGIN IMMEDIATE``..."""
    words = statement.split()
    if not words:
        return "?"
    verb = words[0].upper()
    if verb == "BEGIN":
        return " ".join(w.upper() for w in words[:2])
    match = _TABLE.search(statement)
    return f"{verb} {match.group(1)}" if match else verb


class StatementLog:
    """Counts every statement SQLAlchemy hands to a DBAPI cursor (``before_cursor_execute``:
    SELECT, INSERT, UPDATE and, on SQLite, the driver-level ``BEGIN IMMEDIATE`` that
    ``runner.db`` issues), and separately the DBAPI ``commit()``/``rollback()`` calls, which
    go to the server as COMMIT/ROLLBACK but never pass through a cursor."""

    def __init__(self, engine: AsyncEngine, *, keep: bool = False) -> None:
        self.engine = engine
        self.keep = keep
        self.count = 0
        self.kinds: Counter[str] = Counter()
        self.kept: list[tuple[str, Any]] = []
        self.commits = 0
        self.rollbacks = 0

    def _on_execute(
        self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        self.count += 1
        self.kinds[statement_kind(statement)] += 1
        if self.keep:
            # An executemany (a phase's step rows) is kept with its first row's parameters.
            self.kept.append((statement, parameters[0] if executemany and parameters else parameters))

    def _on_commit(self, conn: Any) -> None:
        self.commits += 1

    def _on_rollback(self, conn: Any) -> None:
        self.rollbacks += 1

    @property
    def transaction_control(self) -> int:
        return self.kinds.get("BEGIN IMMEDIATE", 0) + self.commits + self.rollbacks

    @property
    def without_begin(self) -> int:
        return self.count - self.kinds.get("BEGIN IMMEDIATE", 0)

    def __enter__(self) -> StatementLog:
        target = self.engine.sync_engine
        event.listen(target, "before_cursor_execute", self._on_execute)
        event.listen(target, "commit", self._on_commit)
        event.listen(target, "rollback", self._on_rollback)
        return self

    def __exit__(self, *exc: object) -> None:
        target = self.engine.sync_engine
        event.remove(target, "before_cursor_execute", self._on_execute)
        event.remove(target, "commit", self._on_commit)
        event.remove(target, "rollback", self._on_rollback)


# ── Bench-only actions ────────────────────────────────────────────────────


class AnyParams(BaseModel):
    model_config = ConfigDict(extra="allow")


def bench_action(
    action_id: str, perform: Callable[[Envelope, BaseModel], Awaitable[Any]], *, budget_ms: int = 5000
) -> Action:
    return Action(
        id=action_id,
        label=action_id,
        risk="none",
        reversible="none",
        version=1,
        budget_ms=budget_ms,
        params_model=AnyParams,
        perform=perform,
    )


async def noop(envelope: Envelope, params: BaseModel) -> dict[str, Any]:
    return {"ok": True}


def registry_of(*actions: Action) -> ActionRegistry:
    registry = ActionRegistry()
    registry.register("bench", actions)
    return registry


def spec(key: str, actions: Sequence[str], *, scopes: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """A one-phase definition whose steps name ``actions`` in order (``on_failure: skip`` so a
    surprise failure shows up as a count, not as a stalled benchmark)."""
    return {
        "key": key,
        "title": key.title(),
        "scopes": list(scopes),
        "phases": [
            {
                "key": "main",
                "label": "Main",
                "steps": [{"action": a, "params": {}, "on_failure": "skip"} for a in actions],
            }
        ],
        **extra,
    }


async def publish(engine: AsyncEngine, raw: dict[str, Any], registry: ActionRegistry) -> catalog.Published:
    return await catalog.publish(engine, defs.validate(raw, registry), utcnow())


async def count_runs(engine: AsyncEngine, status: str) -> int:
    async with engine.connect() as conn:
        query = sa.select(sa.func.count()).select_from(runs).where(runs.c.status == status)
        return int((await conn.execute(query)).scalar() or 0)


# ── Dormant runs, straight into the tables ────────────────────────────────

# A realistic show: announce, wait an hour, cue a GM, announce again.
SHOW_STEPS: list[tuple[str, dict[str, Any]]] = [
    ("discord.announce", {"channel": "announcements", "content": "The invasion of {scope} begins"}),
    ("core.wait", {"duration": "1h"}),
    ("gm.cue", {"instructions": "Open the gate in {scope}"}),
    ("discord.announce", {"channel": "announcements", "content": "{scope} is saved"}),
]
DORMANT_KINDS = ("scheduled", "waiting", "parked")


async def publish_show_definitions(engine: AsyncEngine) -> list[catalog.Published]:
    """Three definitions the dormant runs hang off: two manual ones and one weekly cron one
    (so the tick's materialise stage has real work to skip)."""
    from actions import validation_registry

    registry = validation_registry()
    published = []
    for key, schedule in (
        ("invasion", "manual"),
        ("market", "manual"),
        ("weekly-raid", {"cron": "0 20 * * 5", "timezone": "Europe/Berlin"}),
    ):
        raw = {
            "key": key,
            "title": key.replace("-", " ").title(),
            "schedule": schedule,
            "phases": [
                {
                    "key": "main",
                    "label": "Main",
                    "steps": [{"action": a, "params": p, "on_failure": "skip"} for a, p in SHOW_STEPS],
                }
            ],
        }
        published.append(await publish(engine, raw, registry))
    return published


async def seed_runs(
    engine: AsyncEngine,
    count: int,
    *,
    kinds: Sequence[str] = DORMANT_KINDS,
    now: dt.datetime | None = None,
    scope_prefix: str = "world",
    chunk: int = 2000,
) -> Counter[str]:
    """Insert ``count`` runs with their steps and log lines in bulk, cycling through ``kinds``:

    * ``scheduled``: not yet started, ``scheduled_for`` (and ``wake_at``) in the future;
    * ``waiting``: running, its next step held by a wait (``due_at`` = ``wake_at``, future);
    * ``parked``: running, a cue parked (step running with a NULL lease), ``wake_at`` NULL;
    * ``completed``: history (every step done), ``wake_at`` NULL;
    * ``due``: scheduled for now, so the next tick starts it (its steps really run).

    Bulk inserts rather than ``controls.start`` because only the tick is being measured.
    """
    now = now or utcnow()
    definitions = await publish_show_definitions(engine)
    async with engine.connect() as conn:
        first_id = int((await conn.execute(sa.select(sa.func.coalesce(sa.func.max(runs.c.id), 0)))).scalar())
    made: Counter[str] = Counter()
    run_rows: list[dict[str, Any]] = []
    step_rows: list[dict[str, Any]] = []
    log_rows: list[dict[str, Any]] = []

    async def flush() -> None:
        async with engine.begin() as conn:
            if run_rows:
                await conn.execute(sa.insert(runs), run_rows)
            if step_rows:
                await conn.execute(sa.insert(steps), step_rows)
            if log_rows:
                await conn.execute(sa.insert(run_log), log_rows)
        run_rows.clear()
        step_rows.clear()
        log_rows.clear()

    for i in range(count):
        run_id = first_id + 1 + i
        kind = kinds[i % len(kinds)]
        published = definitions[i % len(definitions)]
        made[kind] += 1
        later = now + dt.timedelta(hours=1, seconds=i)
        earlier = now - dt.timedelta(hours=1, seconds=i)
        run: dict[str, Any] = {
            "id": run_id,
            "definition_id": published.definition_id,
            "version_id": published.version_id,
            "scope": f"{scope_prefix}-{i}",
            "status": "running",
            "current_phase": "main",
            "scheduled_for": earlier,
            "started_at": earlier,
            "ended_at": None,
            "wake_at": None,
            "started_by": "bench",
            "created_at": earlier,
            "updated_at": earlier,
        }
        statuses = ["pending"] * len(SHOW_STEPS)
        due: list[dt.datetime | None] = [None] * len(SHOW_STEPS)
        logs = ["run.created"]
        if kind == "scheduled":
            run.update(status="scheduled", current_phase=None, scheduled_for=later, started_at=None)
            run["wake_at"] = later
        elif kind == "due":
            run.update(status="scheduled", current_phase=None, scheduled_for=now, started_at=None)
            run["wake_at"] = now
        elif kind == "waiting":
            statuses[:2] = ["done", "done"]
            due[2] = later
            run["wake_at"] = later
            logs += ["run.status", "run.status", "phase.started", "step.done", "step.done"]
        elif kind == "parked":
            statuses[:3] = ["done", "done", "running"]
            logs += ["run.status", "run.status", "phase.started", "step.done", "step.done", "step.parked"]
        elif kind == "completed":
            run.update(status="completed", current_phase="main", ended_at=earlier)
            statuses = ["done"] * len(SHOW_STEPS)
            logs += ["run.status", "run.status", "phase.started"]
            logs += ["step.done", "step.done", "step.confirmed", "step.done"]
            logs += ["phase.completed", "run.status", "run.status"]
        else:
            raise ValueError(f"unknown run kind {kind!r}")
        run_rows.append(run)
        for seq, ((action_id, params), status) in enumerate(zip(SHOW_STEPS, statuses, strict=True)):
            settled = status in ("done", "running")
            step_rows.append(
                {
                    "run_id": run_id,
                    "phase": "main",
                    "seq": seq,
                    "action_id": action_id,
                    "params": params,
                    "status": status,
                    "due_at": due[seq],
                    "attempts": 1 if settled else 0,
                    "on_failure": "skip",
                    "idempotency_key": new_idempotency_key(),
                    "claimed_by": None,
                    "claim_expires_at": None,
                    "result": {"posted": {"channel_id": "1", "message_id": str(run_id)}} if settled else None,
                    "started_at": earlier if settled else None,
                    "finished_at": earlier if status == "done" else None,
                    "created_at": earlier,
                    "updated_at": earlier,
                }
            )
        for kind_of_line in logs:
            log_rows.append(
                {
                    "run_id": run_id,
                    "step_id": None,
                    "kind": kind_of_line,
                    "detail": {"bench": True},
                    "at": earlier,
                }
            )
        if len(run_rows) >= chunk:
            await flush()
    await flush()
    return made


# ── Query plans ───────────────────────────────────────────────────────────


async def explain_statements(
    engine: AsyncEngine, kept: Sequence[tuple[str, Any]]
) -> tuple[list[str], list[str]]:
    """EXPLAIN (SQLite: ``EXPLAIN QUERY PLAN``) each distinct statement with the parameters it
    was sent with; answer the annotated plans and the statements that scan a large table."""
    seen: set[str] = set()
    lines: list[str] = []
    scans: list[str] = []
    sqlite = engine.dialect.name == "sqlite"
    for statement, parameters in kept:
        if statement.split()[0].upper() in ("BEGIN", "SAVEPOINT", "RELEASE") or statement in seen:
            continue
        seen.add(statement)
        async with engine.connect() as conn:
            prefix = "EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN "
            result = await conn.exec_driver_sql(prefix + statement, as_tuple(parameters))
            rows = [dict(r) for r in result.mappings().all()]
            await conn.rollback()
        verdict, plan = _judge_sqlite(rows) if sqlite else _judge_mariadb(rows)
        short = " ".join(statement.split())
        short = short if len(short) <= 160 else short[:157] + "..."
        lines.append(f"  [{verdict}] {short}")
        lines.extend(f"      {p}" for p in plan)
        if verdict == "SCAN":
            scans.append(short[:80])
    return lines, scans


def as_tuple(parameters: Any) -> Any:
    if isinstance(parameters, list | tuple):
        return tuple(parameters)
    return parameters


# Tables that grow with the number of runs; a scan of the definitions is a scan of a handful.
LARGE_TABLES = ("event_runs", "event_run_steps", "event_run_log")


def _large(table: str | None) -> bool:
    return table is not None and table.strip("`").split()[0] in LARGE_TABLES


def _verdict(large_scan: bool, small_scan: bool) -> str:
    if large_scan:
        return "SCAN"
    return "index, small-table scan" if small_scan else "index"


def _judge_sqlite(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """``SEARCH t USING INDEX`` (or the primary key) is a lookup; ``SCAN t`` reads every row of
    t, and ``SCAN t USING ... INDEX`` every entry of that index."""
    plan = [str(r["detail"]) for r in rows]
    if not plan:
        return "no read", plan  # a plain INSERT
    scanned = [p.split()[1] for p in plan if p.startswith("SCAN ") and "CONSTANT ROW" not in p]
    return _verdict(any(_large(t) for t in scanned), bool(scanned)), plan


def _judge_mariadb(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """``type`` ALL is a table scan and ``index`` a full index scan; range/ref/eq_ref/const
    (or "Select tables optimized away" for MIN/MAX) use an index."""
    plan = []
    large_scan = small_scan = False
    for r in rows:
        access = r.get("type")
        plan.append(
            f"table={r.get('table')} type={access} key={r.get('key')} rows={r.get('rows')} extra={r.get('Extra')}"
        )
        if access in ("ALL", "index"):
            if _large(r.get("table")):
                large_scan = True
            else:
                small_scan = True
    return _verdict(large_scan, small_scan), plan
