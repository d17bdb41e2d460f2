"""The DBOS side of ``bench.peers``, run as a child process: one measurement, one JSON line.

    python -m bench.peers_dbos_child throughput '{"db": "/tmp/x.sqlite", "clients": 8, "runs": 40, "warmup": 2}'
    python -m bench.peers_dbos_child lateness '{"db": "/tmp/x.sqlite", "samples": 50}'

DBOS is a process-wide singleton with its own threads (a thread pool that every system-database
call goes through, a notification poller, a scheduler): a child process keeps them, and DBOS's
logging, away from eventbot's measurement in the parent, and gives each measurement a fresh
DBOS as well as a fresh database.

Equal durability: DBOS's SQLite system database is left in SQLite's defaults (a rollback
journal, ``synchronous=FULL``), so every connection DBOS's engine opens is switched to WAL and
``synchronous=NORMAL`` here, as ``runner.db`` does for eventbot; the child reads both pragmas
back through DBOS's own engine and reports them, so the parent can say what really ran.

Nothing at module level imports dbos: ``bench.peers`` imports the schedule from here whether
or not the ``bench`` extra is installed.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from typing import Any

# One lateness sample per run: started SPACING s after the previous one, waiting 1 to 2 s
# (spread by the golden ratio), so starts and dues interleave instead of landing together.
SPACING = 0.03
WAIT_MIN = 1.0
WAIT_SPREAD = 1.0
STEPS_PER_RUN = 3


def schedule(samples: int) -> list[tuple[float, float]]:
    """(start offset, wait length) in seconds for each lateness run, the same for both sides."""
    return [(i * SPACING, WAIT_MIN + (i * 0.6180339887 % 1.0) * WAIT_SPREAD) for i in range(samples)]


def _equal_durability() -> Any:
    """WAL and synchronous=NORMAL on every SQLite connection any engine in this process opens
    (only DBOS's exists here), and a counter of the statements sent through a cursor."""
    import sqlalchemy as sa

    counted = {"statements": 0}

    @sa.event.listens_for(sa.engine.Engine, "connect")
    def _pragmas(dbapi_conn: Any, record: Any) -> None:
        if "sqlite" not in type(dbapi_conn).__module__:
            return
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @sa.event.listens_for(sa.engine.Engine, "before_cursor_execute")
    def _count(*_: Any) -> None:
        counted["statements"] += 1

    return counted


def _launch(db: str) -> Any:
    """The DBOS instance (its classmethods, and ``_sys_db``, the system database it built)."""
    from dbos import DBOS

    instance = DBOS(
        config={
            "name": "eventbot-bench",
            "system_database_url": f"sqlite:///{db}",
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    return instance


def _pragmas_seen(dbos: Any) -> dict[str, str]:
    import sqlalchemy as sa

    with dbos._sys_db.engine.connect() as conn:
        mode = conn.execute(sa.text("PRAGMA journal_mode")).scalar()
        sync = conn.execute(sa.text("PRAGMA synchronous")).scalar()
    # synchronous reads back as a number: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
    return {"journal_mode": str(mode), "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[sync]}


def _workflows(dbos: Any) -> dict[str, Any]:
    """The bench's workflows, registered before launch as DBOS expects of an application."""

    @dbos.step()
    async def noop() -> None:
        return None

    @dbos.workflow()
    async def three_steps() -> int:
        for _ in range(STEPS_PER_RUN):
            await noop()
        return STEPS_PER_RUN

    @dbos.step()
    async def record() -> float:
        return time.time()

    @dbos.workflow()
    async def held(seconds: float) -> float:
        await noop()
        intended = time.time() + seconds
        await dbos.sleep_async(seconds)
        return (await record()) - intended

    return {"three_steps": three_steps, "held": held}


async def _throughput(
    dbos: Any, workflows: dict[str, Any], args: dict[str, Any], counted: dict[str, int]
) -> dict[str, Any]:
    async def client(n: int, deadline: float) -> int:
        done = runs = 0
        while runs < n and time.perf_counter() < deadline:
            handle = await dbos.start_workflow_async(workflows["three_steps"])
            done += await handle.get_result()
            runs += 1
        return done

    clients = args["clients"]
    await asyncio.gather(*(client(args["warmup"], math.inf) for _ in range(clients)))
    before = counted["statements"]
    started = time.perf_counter()
    deadline = started + args["budget"]
    done = sum(await asyncio.gather(*(client(args["runs"], deadline) for _ in range(clients))))
    elapsed = time.perf_counter() - started
    return {
        "rate": done / elapsed,
        "runs": done // STEPS_PER_RUN,
        "elapsed": elapsed,
        "statements_per_step": (counted["statements"] - before) / done,
    }


async def _lateness(dbos: Any, workflows: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    async def one(offset: float, seconds: float) -> float:
        await asyncio.sleep(offset)
        handle = await dbos.start_workflow_async(workflows["held"], seconds)
        return float(await handle.get_result())

    # Warm-up: the first workflows pay for the thread pool and first statements; not counted.
    await asyncio.gather(*(one(0.0, 0.05) for _ in range(args.get("warmup", 3))))
    late = await asyncio.gather(*(one(offset, seconds) for offset, seconds in schedule(args["samples"])))
    return {"lateness_ms": [v * 1000 for v in late]}


def main(argv: list[str]) -> int:
    kind, raw = argv
    args = json.loads(raw)
    if kind not in ("throughput", "lateness"):
        raise SystemExit(f"unknown measurement {kind!r}")
    counted = _equal_durability()
    from dbos import DBOS

    workflows = _workflows(DBOS)
    dbos = _launch(args["db"])
    try:
        pragmas = _pragmas_seen(dbos)
        if kind == "throughput":
            out = asyncio.run(_throughput(dbos, workflows, args, counted))
        else:
            out = asyncio.run(_lateness(dbos, workflows, args))
    finally:
        dbos.destroy(destroy_registry=True)
    import importlib.metadata as md
    import sqlite3

    versions = {name: md.version(name) for name in ("dbos", "sqlalchemy")}
    versions["sqlite"] = sqlite3.sqlite_version
    print(json.dumps({**out, **pragmas, "versions": versions}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
