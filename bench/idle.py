"""Idle cost: one tick over 10,000 dormant runs against one tick over 10, and the CPU the real
serving loop spends per second over the 10,000 with nothing due.

Dormant means nothing the tick can do moves them: scheduled in the future, waiting behind a
wait (next step due in the future), or parked on a cue (no lease, ``wake_at`` NULL). Both
databases hold the same three definitions (one of them a weekly cron whose occurrences were
already materialised by a warm-up tick). Ticks on the two databases alternate; each repeat
takes the median of a batch of ticks.

Then every statement one tick sends on the large database (plus the loop's ``next_wake``) is
captured with its parameters and EXPLAINed on that database, and marked as using an index or
scanning.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from bench.backends import Backend, MariaDBBackend, fresh_engine
from bench.results import Options, Result, median
from bench.statements import StatementLog, as_tuple, explain_statements, slow_log_summary
from bench.workloads import seed_runs
from runner.engine import Runner, serving_settings
from runner.loop import RunnerLoop

SMALL = 10
LARGE = 10_000
TARGET_RATIO = 1.5


IDLE_CPU_MS_PER_S = 1.0
IDLE_INTERVAL = 5.0


def _idle_seconds(options: Options) -> float:
    return 6.0 if options.quick else 15.0


async def idle_cpu(engine: AsyncEngine, seconds: float) -> tuple[float, int]:
    """CPU milliseconds per second this process spends serving a database of dormant runs with
    nothing due: the loop as the bot runs it, measured after its first tick."""
    runner = Runner(
        engine, validation_registry(), owner="bench-idle", settings=serving_settings(IDLE_INTERVAL)
    )
    loop = RunnerLoop(runner, interval=IDLE_INTERVAL)
    task = asyncio.create_task(loop.run_forever())
    try:
        await asyncio.sleep(1.0)
        ticks, cpu, wall = loop.state.ticks, time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        ticks = loop.state.ticks - ticks
    finally:
        loop.stop()
        await asyncio.wait_for(task, timeout=30)
        await runner.aclose()
    return cpu / wall * 1000, ticks


def _ticks_per_repeat(options: Options) -> int:
    return 10 if options.quick else 30


async def _time_tick(runner: Runner) -> float:
    started = time.perf_counter()
    report = await runner.tick()
    elapsed = time.perf_counter() - started
    if report.steps_dispatched or report.runs_advanced or report.errors:
        raise RuntimeError(f"an idle tick did work: {report}")
    return elapsed


async def run(backend: Backend, options: Options) -> list[Result]:
    async with fresh_engine(backend) as small, fresh_engine(backend) as large:
        await seed_runs(small, SMALL)
        made = await seed_runs(large, LARGE)
        runners = {
            "small": Runner(small, validation_registry(), owner="bench"),
            "large": Runner(large, validation_registry(), owner="bench"),
        }
        for runner in runners.values():
            # Warm-up: materialises the cron definition's occurrences, fills the version cache.
            await runner.tick()
            await runner.tick()
        small_medians: list[float] = []
        large_medians: list[float] = []
        for _ in range(options.repeats):
            small_times: list[float] = []
            large_times: list[float] = []
            for _ in range(_ticks_per_repeat(options)):
                small_times.append(await _time_tick(runners["small"]))
                large_times.append(await _time_tick(runners["large"]))
            small_medians.append(median(small_times))
            large_medians.append(median(large_times))
        plans, scans = await explain_tick(large, runners["large"])
        runtime: list[str] = []
        if isinstance(backend, MariaDBBackend):
            # long_query_time is per session: connections opened before the slow log was turned
            # on would not log. Start the pool afresh.
            await large.dispose()
            with backend.slow_log() as path:
                await runners["large"].tick()
                await runners["large"].next_wake()
            runtime = ["rows examined by one tick on the large database (MariaDB slow log, runtime plans):"]
            runtime += slow_log_summary(path)
        costs = await statement_costs(small, runners["small"], large, runners["large"])
        cpu = [await idle_cpu(large, _idle_seconds(options)) for _ in range(min(options.repeats, 3))]
    measured = median(large_medians)
    baseline = median(small_medians)
    ratio = measured / baseline
    details = [
        f"{LARGE} dormant runs ({', '.join(f'{n} {k}' for k, n in made.items())}) vs {SMALL}; "
        f"{_ticks_per_repeat(options)} ticks per repeat, per-repeat medians (ms) large: "
        + ", ".join(f"{v * 1000:.2f}" for v in large_medians)
        + "; small: "
        + ", ".join(f"{v * 1000:.2f}" for v in small_medians),
        f"EXPLAIN of the {len(plans)} statements of one tick + next_wake on the {LARGE}-run database:",
        *plans,
        *runtime,
        "per-statement cost, median of 20 executions (rolled back), large vs small database:",
        *costs,
    ]
    if scans:
        details.append("SCANS: " + "; ".join(scans))
    cpu_ms = median([ms for ms, _ in cpu])
    cpu_details = [
        f"the real serving loop (RunnerLoop, interval {IDLE_INTERVAL:g} s, serving_settings) over the "
        f"{LARGE}-run database, {_idle_seconds(options):g} s a repeat; this process's CPU "
        "(time.process_time), not the database server's; per repeat ms/s (ticks): "
        + ", ".join(f"{ms:.3f} ({ticks})" for ms, ticks in cpu)
    ]
    return [
        Result(
            f"idle CPU, serving loop, {LARGE // 1000}k dormant",
            backend.name,
            f"{cpu_ms:.3f} ms/s",
            f"{IDLE_CPU_MS_PER_S:g} ms/s target",
            cpu_ms / IDLE_CPU_MS_PER_S,
            f"< {IDLE_CPU_MS_PER_S:g} ms CPU per s",
            cpu_ms < IDLE_CPU_MS_PER_S,
            cpu_details,
        ),
        Result(
            f"idle tick ({LARGE // 1000}k vs {SMALL} dormant)",
            backend.name,
            f"{measured * 1000:.2f} ms",
            f"{baseline * 1000:.2f} ms",
            ratio,
            f"<= {TARGET_RATIO}x; no scans",
            ratio <= TARGET_RATIO and not scans,
            details,
        ),
    ]


async def explain_tick(engine: AsyncEngine, runner: Runner) -> tuple[list[str], list[str]]:
    """EXPLAIN every distinct statement one tick (and the loop's ``next_wake``) sends."""
    with StatementLog(engine, keep=True) as captured:
        await runner.tick()
        await runner.next_wake()
    return await explain_statements(engine, captured.kept)


async def _capture(engine: AsyncEngine, runner: Runner) -> list[tuple[str, Any]]:
    with StatementLog(engine, keep=True) as captured:
        await runner.tick()
        await runner.next_wake()
    return [
        (statement, parameters)
        for statement, parameters in captured.kept
        if statement.split()[0].upper() not in ("BEGIN", "SAVEPOINT", "RELEASE")
    ]


async def _cost(engine: AsyncEngine, statement: str, parameters: Any, times: int = 20) -> float:
    samples = []
    async with engine.connect() as conn:
        for _ in range(times):
            started = time.perf_counter()
            result = await conn.exec_driver_sql(statement, as_tuple(parameters))
            if result.returns_rows:
                result.all()
            samples.append(time.perf_counter() - started)
        await conn.rollback()
    return median(samples)


async def statement_costs(
    small: AsyncEngine, small_runner: Runner, large: AsyncEngine, large_runner: Runner
) -> list[str]:
    """Which of the tick's statements grow with the number of dormant runs: each one timed on
    both databases with the parameters the tick really sent there."""
    small_sent = dict(reversed(await _capture(small, small_runner)))
    lines = []
    seen: set[str] = set()
    for statement, parameters in await _capture(large, large_runner):
        if statement in seen or statement not in small_sent:
            continue
        seen.add(statement)
        big = await _cost(large, statement, parameters)
        little = await _cost(small, statement, small_sent[statement])
        short = " ".join(statement.split())[:90]
        flag = "  <-- grows with dormant runs" if big > 2 * little and big - little > 0.0002 else ""
        lines.append(f"  {big * 1000:6.3f} ms vs {little * 1000:6.3f} ms  {short}{flag}")
    return lines
