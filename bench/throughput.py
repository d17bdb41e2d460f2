"""Throughput: no-op steps per second with 8 runs in flight, against a plain SQLAlchemy ceiling.

The runner side: one definition of ``steps`` no-op steps in 8 scopes, started by the controls,
then ``Runner.tick()`` in a loop until a tick finds nothing to do (every run completed).

The ceiling: the same tables, rows and engine factory, 8 interleaved asyncio tasks each walking
its run's steps with exactly the two transactions a step cannot do without: claim
(``UPDATE ... SET status='running', attempts=attempts+1 ... WHERE id=? AND status='pending'``)
and settle (``UPDATE ... SET status='done' ...`` + ``INSERT INTO event_run_log``). No lease on the
run, no re-reads, no phase bookkeeping: what a step costs when nothing else is paid for.

Statements per plain step are counted with ``before_cursor_execute`` over the whole runner
measurement (every stage of every tick, the run starts, the phase and completion bookkeeping),
divided by the steps dispatched.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.backends import Backend, MariaDBBackend, fresh_engine
from bench.results import Options, Result, median
from bench.statements import ServerCounters, StatementLog, explain_statements, slow_log_summary
from bench.workloads import bench_action, count_runs, publish, registry_of
from runner.clock import utcnow
from runner.controls import Controls
from runner.engine import Runner, RunnerSettings
from runner.history import Actor
from runner.registry import Envelope
from runner.schema import run_log, steps
from tests.support.actions import ok
from tests.support.definitions import event, phase, step

RUNS = 8
TARGET_RATIO = 0.6
TARGET_STATEMENTS = 4.0


def _steps_per_run(options: Options) -> int:
    return 40 if options.quick else 200


async def _start_runs(engine: AsyncEngine, steps_per_run: int) -> list[int]:
    registry = registry_of(bench_action("bench.noop", ok))
    scopes = [f"run-{i}" for i in range(RUNS)]
    noops = phase("main", *(step("bench.noop") for _ in range(steps_per_run)))
    await publish(engine, event("throughput", noops, scopes=scopes), registry)
    started = await Controls(engine).start("throughput", actor=Actor(None, "bench"))
    assert started.ok and len(started.run_ids) == RUNS, started.message
    return list(started.run_ids)


async def _measure_runner(backend: Backend, steps_per_run: int, *, keep: bool = False) -> dict[str, Any]:
    async with fresh_engine(backend) as engine:
        await _start_runs(engine, steps_per_run)
        runner = Runner(
            engine, registry_of(bench_action("bench.noop", ok)), settings=RunnerSettings(), owner="bench"
        )
        dispatched = ticks = 0
        errors: list[str] = []
        with StatementLog(engine, keep=keep) as counted, ServerCounters(backend) as server:
            started = time.perf_counter()
            while True:
                report = await runner.tick()
                ticks += 1
                errors.extend(report.errors)
                dispatched += report.steps_dispatched
                if report.steps_dispatched == 0 and report.runs_advanced == 0:
                    # Nothing due. Done, unless an error left a run to wake later (the engine's
                    # retry backoff): then wait for it, and let the stall count against us.
                    if not errors or await count_runs(engine, "completed") == RUNS:
                        break
                    await asyncio.sleep(0.1)
            elapsed = time.perf_counter() - started
        completed = await count_runs(engine, "completed")
        plans = (
            (await explain_statements(engine, counted.kept))[0] if keep and backend.name == "sqlite" else []
        )
    assert completed == RUNS and dispatched >= RUNS * steps_per_run, (dispatched, completed)
    return {
        "rate": dispatched / elapsed,
        "per_step": counted.count / dispatched,
        "per_step_without_begin": counted.without_begin / dispatched,
        "commits_per_step": (counted.commits + counted.rollbacks) / dispatched,
        "server_per_step": server.per("Questions", dispatched),
        "rows_read_per_step": server.per("Rows_read", dispatched),
        "plans": plans,
        "kinds": {k: v / dispatched for k, v in counted.kinds.most_common()},
        "ticks": ticks,
        "errors": errors,
    }


async def _measure_ceiling(backend: Backend, steps_per_run: int) -> dict[str, Any]:
    async with fresh_engine(backend) as engine:
        run_ids = await _start_runs(engine, steps_per_run)
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(steps.c.id, steps.c.run_id)
                    .where(steps.c.run_id.in_(run_ids))
                    .order_by(steps.c.id)
                )
            ).all()
        by_run: dict[int, list[int]] = {run_id: [] for run_id in run_ids}
        for row in rows:
            by_run[int(row.run_id)].append(int(row.id))
        owner = "ceiling"

        async def walk(run_id: int, step_ids: list[int]) -> None:
            for step_id in step_ids:
                now = utcnow()
                async with engine.begin() as conn:
                    claimed = await conn.execute(
                        sa.update(steps)
                        .where(steps.c.id == step_id, steps.c.status == "pending")
                        .values(
                            status="running",
                            attempts=steps.c.attempts + 1,
                            claimed_by=owner,
                            claim_expires_at=now + dt.timedelta(seconds=20),
                            started_at=now,
                            updated_at=now,
                        )
                    )
                assert claimed.rowcount == 1
                envelope = Envelope(None, "k", {}, run_id, "", step_id, False)
                await ok(envelope, None)  # type: ignore[arg-type]
                now = utcnow()
                async with engine.begin() as conn:
                    await conn.execute(
                        sa.update(steps)
                        .where(
                            steps.c.id == step_id, steps.c.status == "running", steps.c.claimed_by == owner
                        )
                        .values(
                            status="done",
                            claimed_by=None,
                            claim_expires_at=None,
                            finished_at=now,
                            updated_at=now,
                        )
                    )
                    await conn.execute(
                        sa.insert(run_log).values(
                            run_id=run_id,
                            step_id=step_id,
                            kind="step.done",
                            detail={"action": "bench.noop", "attempts": 1},
                            at=now,
                        )
                    )

        with StatementLog(engine) as counted, ServerCounters(backend) as server:
            started = time.perf_counter()
            await asyncio.gather(*(walk(run_id, ids) for run_id, ids in by_run.items()))
            elapsed = time.perf_counter() - started
    total = RUNS * steps_per_run
    return {
        "rate": total / elapsed,
        "per_step": counted.count / total,
        "server_per_step": server.per("Questions", total),
        "rows_read_per_step": server.per("Rows_read", total),
    }


async def run(backend: Backend, options: Options) -> list[Result]:
    steps_per_run = _steps_per_run(options)
    measured: list[dict[str, Any]] = []
    ceilings: list[dict[str, Any]] = []
    for _ in range(options.repeats):
        # Alternate, so drift in the machine's speed lands on both sides.
        ceilings.append(await _measure_ceiling(backend, steps_per_run))
        measured.append(await _measure_runner(backend, steps_per_run))
    rate = median([m["rate"] for m in measured])
    ceiling = median([c["rate"] for c in ceilings])
    ratio = rate / ceiling
    per_step = median([m["per_step"] for m in measured])
    per_step_plain = median([m["per_step_without_begin"] for m in measured])
    ceiling_per_step = median([c["per_step"] for c in ceilings])
    kinds = measured[len(measured) // 2]["kinds"]
    details = [
        f"{RUNS} runs x {steps_per_run} no-op steps, {options.repeats} repeats; runner steps/s per repeat: "
        + ", ".join(f"{m['rate']:.0f}" for m in measured)
        + "; ceiling: "
        + ", ".join(f"{c['rate']:.0f}" for c in ceilings),
        f"ticks per measurement: {measured[0]['ticks']} (steps_per_tick={RunnerSettings().steps_per_tick})",
        "statements per step by kind (runner, cursor executes): "
        + ", ".join(f"{k} {v:.2f}" for k, v in kinds.items()),
        f"DBAPI commit()/rollback() calls per step (not in the count): {median([m['commits_per_step'] for m in measured]):.2f}",
    ]
    for i, m in enumerate(measured):
        if m["errors"]:
            first = m["errors"][0].splitlines()[0][:300]
            details.append(
                f"repeat {i + 1}: {len(m['errors'])} tick error(s), {m['rate']:.0f} steps/s; first: {first}"
            )
    if isinstance(backend, MariaDBBackend):
        details.append(
            "MariaDB counters per step, runner vs ceiling: Questions (statements + COMMIT + ROLLBACK) "
            f"{median([m['server_per_step'] for m in measured]):.2f} vs {median([c['server_per_step'] for c in ceilings]):.2f}; "
            f"Rows_read {median([m['rows_read_per_step'] for m in measured]):.1f} vs "
            f"{median([c['rows_read_per_step'] for c in ceilings]):.1f}"
        )
        # One more, untimed, pass with the slow log on: the plan each statement really ran with.
        with backend.slow_log() as path:
            await _measure_runner(backend, steps_per_run)
        details.append(
            "rows examined per statement in one untimed runner pass (MariaDB slow log, runtime plans):"
        )
        details.extend(slow_log_summary(path))
    else:
        diagnostic = await _measure_runner(backend, steps_per_run, keep=True)
        details.append("EXPLAIN QUERY PLAN of every distinct statement of one untimed runner pass:")
        details.extend(diagnostic["plans"])
    statements_target = f"<= {TARGET_STATEMENTS:.0f} excl. BEGIN/COMMIT"
    return [
        Result(
            "throughput (steps/s, 8 runs)",
            backend.name,
            f"{rate:.0f}/s",
            f"{ceiling:.0f}/s ceiling",
            ratio,
            f">= {TARGET_RATIO}x ceiling",
            ratio >= TARGET_RATIO,
            details,
        ),
        Result(
            "statements per plain step",
            backend.name,
            f"{per_step:.2f} ({per_step_plain:.2f} excl. BEGIN)",
            f"{ceiling_per_step:.2f} ceiling",
            per_step / ceiling_per_step,
            statements_target,
            per_step_plain <= TARGET_STATEMENTS,
            [],
        ),
    ]
