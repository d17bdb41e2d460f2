"""Peers: eventbot next to DBOS Transact, the same two workloads, interleaved in one run.

* **3-step runs, steps/s**: 8 clients, each in a loop starting a run of 3 no-op steps and
  waiting for it to end. eventbot: one definition in 8 scopes, each client starting its own
  scope through ``Controls(on_change=loop.nudge, driver=runner)`` with the runner in its real
  serving loop (``bench.timeliness.serving``, as the bot runs it), so the runner drives each
  start at once in this process, and waiting with ``runner.until_ended``; a scope is refused while a run of it is in
  flight, so a client waits for its run to end before starting the next. DBOS: an async ``@DBOS.workflow``
  calling 3 async ``@DBOS.step`` no-ops, each client ``await (await
  DBOS.start_workflow_async(wf)).get_result()``.
* **Lateness after a 1-2 s wait**: runs of [step, wait, step], started 30 ms apart with waits
  of 1 to 2 s (``peers_dbos_child.schedule``, the same for both). eventbot: a hold answering
  ``holdFor`` then a record step; lateness = the record step's dispatch instant - its
  ``due_at``. DBOS: ``DBOS.sleep_async`` between two steps; lateness = when the second step
  runs - (the instant noted just before the sleep + its length).

Equal durability: SQLite in WAL with ``synchronous=NORMAL`` on both sides (``runner.db`` for
eventbot; the child switches DBOS's connections and reads the pragmas back), each step's
completion committed before the next step runs. DBOS has no MariaDB backend, so on the
mariadb backend eventbot-on-MariaDB is set against DBOS-on-SQLite measured in the same run.

Each DBOS measurement runs in a child process (``bench.peers_dbos_child``), each eventbot one
in this process as the other benchmarks do; they alternate (eventbot, DBOS, eventbot, ...),
each on a fresh database with a few warm-up runs not counted. The ratio is eventbot / DBOS per
repeat; the row shows the median of those ratios. The DBOS side is the optional ``bench``
extra: without it the rows say so rather than fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from bench import peers_dbos
from bench.backends import Backend, fresh_database
from bench.peers_dbos_child import STEPS_PER_RUN, schedule
from bench.results import Options, Result, median, percentile
from bench.statements import StatementLog
from bench.timeliness import Recorder, serving
from bench.workloads import bench_action, publish, registry_of
from runner.controls import Controls
from runner.db import create_engine
from runner.engine import Runner
from runner.history import Actor
from runner.loop import RunnerLoop
from runner.registry import ActionRegistry, Envelope
from runner.schema import steps
from runner.states import RunStatus
from tests.support.actions import ok
from tests.support.definitions import event, phase, step

CLIENTS = 8
THROUGHPUT = "vs DBOS: 3-step runs, steps/s"
LATENESS = "vs DBOS: lateness after a 1-2 s wait, p99"

# A run that has not ended this long after its start is stuck: say so rather than hang the bench.
RUN_TIMEOUT = 30.0
WARMUP_WAIT = 0.05


# ── eventbot, in this process ─────────────────────────────────────────────


@contextlib.asynccontextmanager
async def _ends_within(seconds: float, run_id: int) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise RuntimeError(f"eventbot run {run_id} did not get to its end within {seconds:.0f} s") from None


@contextlib.asynccontextmanager
async def _driven(
    engine: AsyncEngine, registry: ActionRegistry
) -> AsyncIterator[tuple[RunnerLoop, Runner, Controls]]:
    """The runner in its real serving loop (``bench.timeliness.serving``: the settings the bot
    serves with), and controls that hand each start to that runner, which drives the run at
    once in this process, as the bot's do."""
    async with serving(engine, registry) as loop:
        runner = loop.runner
        assert isinstance(runner, Runner)
        yield loop, runner, Controls(engine, on_change=loop.nudge, driver=runner)


async def measure_throughput(
    url: str, *, clients: int, per_client: int, warmup: int, budget: float
) -> dict[str, Any]:
    """``clients`` loops of ``per_client`` runs each, or fewer where ``budget`` seconds have
    passed (a client then starts no more runs), so a slow engine cannot stretch the bench."""
    registry = registry_of(bench_action("bench.noop", ok))
    scopes = [f"c{i}" for i in range(clients)]
    engine = create_engine(url)
    try:
        noops = phase("main", *(step("bench.noop") for _ in range(STEPS_PER_RUN)))
        await publish(engine, event("peers", noops, scopes=scopes), registry)
        ended: list[str] = []
        async with _driven(engine, registry) as (loop, runner, controls):

            async def client(scope: str, n: int, deadline: float) -> int:
                done = 0
                while done < n and time.perf_counter() < deadline:
                    started = await controls.start("peers", scope=scope, actor=Actor(None, "bench"))
                    assert started.ok, started.message
                    async with _ends_within(RUN_TIMEOUT, started.run_ids[0]):
                        ended.append(await runner.until_ended(started.run_ids[0]))
                    done += 1
                return done

            await asyncio.gather(*(client(scope, warmup, math.inf) for scope in scopes))
            with StatementLog(engine) as counted:
                began = time.perf_counter()
                finished = await asyncio.gather(*(client(s, per_client, began + budget) for s in scopes))
                elapsed = time.perf_counter() - began
    finally:
        await engine.dispose()
    done = sum(finished) * STEPS_PER_RUN
    return {
        "rate": done / elapsed,
        "runs": sum(finished),
        "statements_per_step": counted.count / done,
        "statements_per_step_without_begin": counted.without_begin / done,
        "not_completed": [s for s in ended if s != RunStatus.COMPLETED],
        "failed_ticks": loop.state.failures,
        "waits_by": "runner.until_ended (the drive in this process wakes the waiter as it lets the run go)",
    }


class _Held(Recorder):
    """timeliness.Recorder with each scope's hold taken from the shared schedule."""

    def __init__(self, waits: dict[str, float]) -> None:
        super().__init__()
        self.waits = waits

    async def hold(self, envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        return {"ok": True, "holdFor": self.waits[envelope.scope]}


async def measure_lateness(url: str, samples: int, warmup: int = 3) -> dict[str, Any]:
    planned = schedule(samples)
    waits = {f"w{i}": WARMUP_WAIT for i in range(warmup)}
    waits.update({f"s{i}": seconds for i, (_, seconds) in enumerate(planned)})
    recorder = _Held(waits)
    registry = recorder.registry()
    engine = create_engine(url)
    try:
        held = phase("main", step("bench.hold"), step("bench.record"))
        await publish(engine, event("peers-late", held, scopes=list(waits)), registry)
        async with _driven(engine, registry) as (loop, _, controls):

            async def one(scope: str, offset: float) -> int:
                await asyncio.sleep(offset)
                started = await controls.start("peers-late", scope=scope, actor=Actor(None, "bench"))
                assert started.ok, started.message
                run_id = started.run_ids[0]
                async with _ends_within(offset + RUN_TIMEOUT, run_id):
                    await recorder.event(run_id).wait()
                return run_id

            await asyncio.gather(*(one(f"w{i}", 0.0) for i in range(warmup)))
            run_ids = await asyncio.gather(*(one(f"s{i}", offset) for i, (offset, _) in enumerate(planned)))
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(steps.c.run_id, steps.c.due_at).where(
                        steps.c.action_id == "bench.record", steps.c.run_id.in_(run_ids)
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    due: dict[int, dt.datetime] = {int(r.run_id): r.due_at for r in rows}
    return {
        "lateness_ms": [(recorder.dispatched_at[r] - due[r]).total_seconds() * 1000 for r in run_ids],
        "ticks": loop.state.ticks,
    }


def _sizes(options: Options) -> dict[str, Any]:
    if options.quick:
        return {"runs": 10, "warmup": 1, "samples": 30, "budget": 4.0}
    # 150 lateness samples a repeat: a p99 of 50 is its slowest sample, and one stray decides it.
    return {"runs": 40, "warmup": 2, "samples": 150, "budget": 12.0}


def _missing(backend: Backend) -> list[Result]:
    detail = ["dbos is not installed, so there is nothing to compare with: pip install -e .[bench]"]
    return [
        Result(THROUGHPUT, backend.name, "-", "DBOS not installed", None, ">= 1.0x DBOS", None, detail),
        Result(LATENESS, backend.name, "-", "DBOS not installed", None, "<= 1.0x DBOS", None, detail),
    ]


async def run(backend: Backend, options: Options) -> list[Result]:
    if not peers_dbos.installed():
        return _missing(backend)
    sizes = _sizes(options)
    load = {"clients": CLIENTS, "runs": sizes["runs"], "warmup": sizes["warmup"], "budget": sizes["budget"]}
    ebot_rates: list[dict[str, Any]] = []
    dbos_rates: list[dict[str, Any]] = []
    ebot_late: list[dict[str, Any]] = []
    dbos_late: list[dict[str, Any]] = []
    for _ in range(options.repeats):
        async with fresh_database(backend) as url:
            ebot_rates.append(
                await measure_throughput(
                    url,
                    clients=CLIENTS,
                    per_client=sizes["runs"],
                    warmup=sizes["warmup"],
                    budget=sizes["budget"],
                )
            )
        dbos_rates.append(await peers_dbos.measure("throughput", load))
        async with fresh_database(backend) as url:
            ebot_late.append(await measure_lateness(url, sizes["samples"]))
        dbos_late.append(await peers_dbos.measure("lateness", {"samples": sizes["samples"]}))
    return [
        _throughput_row(backend, sizes, ebot_rates, dbos_rates),
        _lateness_row(backend, sizes, ebot_late, dbos_late),
    ]


def _throughput_row(
    backend: Backend, sizes: dict[str, Any], ebot: list[dict[str, Any]], dbos: list[dict[str, Any]]
) -> Result:
    ratios = [e["rate"] / d["rate"] for e, d in zip(ebot, dbos, strict=True)]
    ratio = median(ratios)
    per_step = median([e["statements_per_step"] for e in ebot])
    per_step_plain = median([e["statements_per_step_without_begin"] for e in ebot])
    details = [
        f"{CLIENTS} clients x up to {sizes['runs']} runs of 3 no-op steps each, a client starting no "
        f"more after {sizes['budget']:.0f} s ({sizes['warmup']} warm-up runs per client not counted), "
        f"{len(ratios)} repeats, alternating eventbot then DBOS",
        "steps/s per repeat, eventbot / DBOS = ratio (runs measured): "
        + "; ".join(
            f"{e['rate']:.0f} / {d['rate']:.0f} = {r:.2f}x ({e['runs']} / {d['runs']})"
            for e, d, r in zip(ebot, dbos, ratios, strict=True)
        ),
        f"eventbot statements per step over the measurement, lifecycle included (starts, phases, "
        f"completions; cursor executes): {per_step:.2f}, {per_step_plain:.2f} without BEGIN "
        f"(target of issue 10: <= 5); DBOS: {median([d['statements_per_step'] for d in dbos]):.2f}",
        f"eventbot waits for a run's end by {ebot[0]['waits_by']}",
        *peers_dbos.describe(backend, dbos[0]),
        *peers_dbos.DIFFERENCES,
    ]
    for i, e in enumerate(ebot):
        if e["not_completed"] or e["failed_ticks"]:
            details.append(
                f"repeat {i + 1}: runs that did not complete: {e['not_completed'][:5]}; "
                f"failed ticks: {e['failed_ticks']}"
            )
    return Result(
        THROUGHPUT,
        backend.name,
        f"{median([e['rate'] for e in ebot]):.0f}/s",
        f"{median([d['rate'] for d in dbos]):.0f}/s DBOS-SQLite",
        ratio,
        ">= 1.0x DBOS",
        ratio >= 1.0,
        details,
    )


def _lateness_row(
    backend: Backend, sizes: dict[str, Any], ebot: list[dict[str, Any]], dbos: list[dict[str, Any]]
) -> Result:
    def stats(values: list[float]) -> tuple[float, float, float]:
        return percentile(values, 50), percentile(values, 99), max(values)

    ebot_stats = [stats(e["lateness_ms"]) for e in ebot]
    dbos_stats = [stats(d["lateness_ms"]) for d in dbos]
    ratios = [e[1] / d[1] for e, d in zip(ebot_stats, dbos_stats, strict=True)]
    ratio = median(ratios)
    early = sum(1 for e in ebot for v in e["lateness_ms"] if v < 0)
    details = [
        f"{sizes['samples']} runs of [step, wait 1-2 s, step] per repeat, started 30 ms apart, "
        f"{len(ratios)} repeats, alternating eventbot then DBOS (3 warm-up runs each, not counted)",
        "per repeat p50/p99/max ms, eventbot | DBOS, p99 ratio: "
        + "; ".join(
            f"{e[0]:.1f}/{e[1]:.1f}/{e[2]:.1f} | {d[0]:.1f}/{d[1]:.1f}/{d[2]:.1f}, {r:.2f}x"
            for e, d, r in zip(ebot_stats, dbos_stats, ratios, strict=True)
        ),
        f"eventbot steps dispatched before their due_at: {early}; ticks per measurement: "
        + ", ".join(str(e["ticks"]) for e in ebot),
        "eventbot: dispatch instant of the record step - its due_at (both from runner.clock); DBOS: "
        "time.time() in the step after the sleep - (time.time() just before DBOS.sleep_async + seconds)",
        *peers_dbos.describe(backend, dbos[0]),
    ]
    return Result(
        LATENESS,
        backend.name,
        f"p99 {median([s[1] for s in ebot_stats]):.1f} ms (p50 {median([s[0] for s in ebot_stats]):.1f})",
        f"DBOS p99 {median([s[1] for s in dbos_stats]):.1f} ms (p50 {median([s[0] for s in dbos_stats]):.1f})",
        ratio,
        "<= 1.0x DBOS",
        ratio <= 1.0 and early == 0,
        details,
    )
