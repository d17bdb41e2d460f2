"""What a measurement sends to the database, and how the database answers it: a client-side
statement counter, the MariaDB server's own counters and slow log, and EXPLAIN of every
distinct statement with the parameters it was sent with (each marked as an index lookup or a
scan of a table that grows with the runs)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.backends import Backend, MariaDBBackend

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


# ── The MariaDB server's view: its counters and its slow log ──────────────


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
