"""``python -m bench.whatif``: the expected effect of each engine change ``bench/RESULTS.md``
recommends, measured side by side with the engine as it is, in the same run.

Nothing in ``runner/`` is edited: each change is imitated from the outside, through a public
parameter or by rewriting the SQL on its way to the driver (an engine event hook), so these
numbers are what the change would buy, not a patch.

* ``loop``: timeliness with ``RunnerLoop(stuck_delay=0)`` (a wake that passed during a tick is
  served at once) against the default 0.5 s.
* ``due-index``: SQLite's idle tick with ``find_due`` reading ``idx_evrun_wake``
  (``INDEXED BY``) against the planner's own choice.
* ``step-pk``: MariaDB throughput with the by-id step UPDATEs pinned to the primary key
  (``FORCE INDEX (PRIMARY)``), and with ``idx_evstep_due`` dropped, against the planner's
  choice.
* ``blocked-index``: MariaDB fan-out rows read with an index on ``event_runs.blocked_by``.
* ``fanout-concurrency``: fan-out with ``RunnerSettings(concurrent_runs=16)`` against 64.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

import bench.backends as backends
from bench import fanout, throughput, timeliness
from bench.backends import Backend, MariaDBBackend, fresh_engine, make_backend
from bench.results import median, percentile
from bench.workloads import seed_runs
from runner.engine import Runner, RunnerSettings
from runner.loop import RunnerLoop

Rewrite = Callable[[str], str]


@contextlib.contextmanager
def rewritten(rewrite: Rewrite) -> Iterator[None]:
    """Every engine ``bench`` builds while the block runs sends ``rewrite(statement)``."""
    factory = backends.create_engine

    def patched(url: str, **overrides: Any) -> AsyncEngine:
        engine = factory(url, **overrides)

        def hook(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> tuple[str, Any]:
            return rewrite(statement), parameters

        event.listen(engine.sync_engine, "before_cursor_execute", hook, retval=True)
        return engine

    backends.create_engine = patched
    try:
        yield
    finally:
        backends.create_engine = factory


def force_step_pk(statement: str) -> str:
    if statement.startswith("UPDATE event_run_steps SET") and "WHERE event_run_steps.id = " in statement:
        return statement.replace(
            "UPDATE event_run_steps SET", "UPDATE event_run_steps FORCE INDEX (PRIMARY) SET", 1
        )
    return statement


def due_by_wake(statement: str) -> str:
    marker = "FROM event_runs \nWHERE event_runs.wake_at <="
    if marker in statement:
        return statement.replace(
            marker, "FROM event_runs INDEXED BY idx_evrun_wake \nWHERE event_runs.wake_at <="
        )
    return statement


async def loop_what_if(backend: Backend, rounds: int) -> None:
    for stuck in (0.5, 0.0) * rounds:
        timeliness.RunnerLoop = functools.partial(RunnerLoop, stuck_delay=stuck)  # type: ignore[misc]
        try:
            late = (await timeliness.measure_lateness(backend, 200))["lateness"]
        finally:
            timeliness.RunnerLoop = RunnerLoop  # type: ignore[misc]
        print(
            f"  loop stuck_delay={stuck}: wait lateness p50 {percentile(late, 50):.1f} ms, "
            f"p99 {percentile(late, 99):.1f} ms"
        )


async def _tick_ms(runner: Runner, ticks: int = 30) -> float:
    times = []
    for _ in range(ticks):
        started = time.perf_counter()
        await runner.tick()
        times.append(time.perf_counter() - started)
    return median(times) * 1000


async def due_index_what_if(backend: Backend, rounds: int) -> None:
    from actions import validation_registry

    async with fresh_engine(backend) as small, fresh_engine(backend) as large:
        await seed_runs(small, idle_small := 10)
        await seed_runs(large, idle_large := 10_000)
        runners = [Runner(e, validation_registry(), owner="bench") for e in (small, large)]
        hinted = []
        for engine in (small, large):
            with rewritten(due_by_wake):
                copy = backends.create_engine(engine.url.render_as_string(hide_password=False))
            hinted.append(Runner(copy, validation_registry(), owner="bench"))
        for runner in (*runners, *hinted):
            await runner.tick()
        for _ in range(rounds):
            plain = [await _tick_ms(r) for r in runners]
            pinned = [await _tick_ms(r) for r in hinted]
            print(
                f"  idle tick {idle_large} vs {idle_small}: as is {plain[1]:.2f} / {plain[0]:.2f} ms "
                f"= {plain[1] / plain[0]:.2f}x; find_due on idx_evrun_wake {pinned[1]:.2f} / {pinned[0]:.2f} ms "
                f"= {pinned[1] / pinned[0]:.2f}x"
            )
        for runner in hinted:
            await runner.engine.dispose()


@contextlib.contextmanager
def extra_ddl(backend: Backend, *statements: str) -> Iterator[None]:
    """Every fresh database the backend makes while the block runs gets ``statements`` run on
    it after the migrations (a schema change, imitated)."""
    original = backend.create
    factory = backends.create_engine

    async def create() -> str:
        url = await original()
        engine = factory(url)
        async with engine.begin() as conn:
            for statement in statements:
                await conn.exec_driver_sql(statement)
        await engine.dispose()
        return url

    backend.create = create  # type: ignore[method-assign]
    try:
        yield
    finally:
        backend.create = original  # type: ignore[method-assign]


def _rate(label: str, measured: dict[str, Any], ceiling: dict[str, Any]) -> str:
    return (
        f"{label} {measured['rate']:.0f}/s ({measured['rate'] / ceiling['rate']:.2f}x, "
        f"{measured['rows_read_per_step']:.1f} rows read/step)"
    )


async def step_pk_what_if(backend: Backend, rounds: int) -> None:
    for _ in range(rounds):
        ceiling = await throughput._measure_ceiling(backend, 200)
        as_is = await throughput._measure_runner(backend, 200)
        with rewritten(force_step_pk):
            pinned = await throughput._measure_runner(backend, 200)
        with extra_ddl(backend, "DROP INDEX idx_evstep_due ON event_run_steps"):
            dropped = await throughput._measure_runner(backend, 200)
        print(
            f"  throughput: ceiling {ceiling['rate']:.0f}/s; "
            + "; ".join(
                (
                    _rate("as is", as_is, ceiling),
                    _rate("FORCE INDEX (PRIMARY)", pinned, ceiling),
                    _rate("without idx_evstep_due", dropped, ceiling),
                )
            )
        )


async def blocked_index_what_if(backend: Backend, rounds: int) -> None:
    for _ in range(rounds):
        as_is = await fanout.measure(backend)
        with extra_ddl(backend, "CREATE INDEX idx_evrun_blocked ON event_runs (blocked_by)"):
            indexed = await fanout.measure(backend)
        print(
            f"  fan-out 500: as is {as_is['seconds']:.2f} s, {as_is['rows_read']:.0f} rows read/run; "
            f"with idx_evrun_blocked {indexed['seconds']:.2f} s, {indexed['rows_read']:.0f} rows read/run"
        )


async def fanout_concurrency_what_if(backend: Backend, rounds: int) -> None:
    for _ in range(rounds):
        line = []
        for concurrent in (64, 16):
            measured = await fanout.measure(backend, settings=RunnerSettings(concurrent_runs=concurrent))
            line.append(
                f"concurrent_runs={concurrent}: {measured['seconds']:.2f} s "
                f"(first request at {measured['first']:.2f} s, start returned at {measured['start']:.2f} s)"
            )
        print("  fan-out 500: " + "; ".join(line))


EXPERIMENTS = {
    "loop": (("sqlite", "mariadb"), loop_what_if),
    "due-index": (("sqlite",), due_index_what_if),
    "step-pk": (("mariadb",), step_pk_what_if),
    "blocked-index": (("mariadb",), blocked_index_what_if),
    "fanout-concurrency": (("sqlite", "mariadb"), fanout_concurrency_what_if),
}


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.whatif", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(EXPERIMENTS))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    wanted = [name for name in EXPERIMENTS if name in args.only.split(",")]
    backends: dict[str, Backend] = {}
    try:
        for name in wanted:
            names, experiment = EXPERIMENTS[name]
            for backend_name in names:
                backend = backends.get(backend_name) or backends.setdefault(
                    backend_name, make_backend(backend_name)
                )
                if name in ("step-pk", "blocked-index") and not isinstance(backend, MariaDBBackend):
                    continue
                print(f"{name} [{backend_name}]", flush=True)
                await experiment(backend, args.rounds)
    finally:
        for backend in backends.values():
            backend.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("asyncmy").setLevel(logging.ERROR)
    asyncio.run(main(sys.argv[1:]))
