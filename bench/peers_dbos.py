"""The DBOS side of ``bench.peers``: whether the ``bench`` extra is installed, one measurement
in a child process (``bench.peers_dbos_child``, a fresh DBOS on a fresh SQLite file each time),
and what the details say about DBOS and about how it differs from eventbot."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.backends import Backend

ROOT = Path(__file__).resolve().parent.parent

DIFFERENCES = [
    "what differs: DBOS keeps each workflow in memory as a coroutine and checkpoints every step's "
    "output in operation_outputs (one row per step, plus the workflow_status row); its "
    "start_workflow_async runs the workflow at once in the caller's process, and a sleep is an "
    "asyncio.sleep after one recorded row. eventbot keeps each run in its tables only (a run row "
    "leased by its runner, a step row per step, a run log line per step and per status change, "
    "phases); a start handed to this process's runner is driven at once outside the ticks, a wait "
    "of up to 30 s is slept through in process with the run still leased, and the serving loop's "
    "ticks take over whatever a drive gave back.",
    "DBOS on SQLite: pysqlite with isolation_level IMMEDIATE (BEGIN IMMEDIATE before the first write, "
    "reads in autocommit), a pool of 20 connections used from worker threads (asyncio.to_thread); "
    "eventbot's runner.db: one pooled connection whose statements run on the event loop's thread (runner.sqlite_inline), every transaction begun IMMEDIATE.",
]


def installed() -> bool:
    return importlib.util.find_spec("dbos") is not None


async def measure(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    """One DBOS measurement in a fresh child process on a fresh SQLite file."""
    with tempfile.TemporaryDirectory(prefix="eventbot-bench-dbos-") as tmp:
        db = str(Path(tmp) / f"dbos-{uuid.uuid4().hex[:8]}.sqlite3")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.peers_dbos_child",
            kind,
            json.dumps({**args, "db": db}),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout=180)
    if process.returncode != 0:
        raise RuntimeError(f"DBOS {kind} child failed ({process.returncode}): {err.decode()[-2000:]}")
    return json.loads(out.decode().strip().splitlines()[-1])


def describe(backend: Backend, dbos: dict[str, Any]) -> list[str]:
    """Which DBOS ran, with which durability, and what it is set against on this backend."""
    versions = dbos["versions"]
    lines = [
        f"DBOS Transact {versions['dbos']} (SQLAlchemy {versions['sqlalchemy']}, SQLite {versions['sqlite']}); "
        f"its system database ran journal_mode={dbos['journal_mode']}, synchronous={dbos['synchronous']} "
        "(read back through DBOS's engine)"
    ]
    if backend.name != "sqlite":
        lines.append(
            f"DBOS has no {backend.name} backend (it runs on SQLite or PostgreSQL): eventbot on "
            f"{backend.name} (the throwaway server: innodb_flush_log_at_trx_commit=2, a commit reaches "
            "the OS at once and the disk within a second, like WAL with NORMAL) is set against DBOS on "
            "SQLite (WAL, NORMAL) measured in the same run."
        )
    return lines
