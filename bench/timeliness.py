"""Timeliness, with the runner driven by its real serving loop (``RunnerLoop(interval=5)`` and
the real ``SystemClock``), never ticked by hand.

* **Lateness behind a wait**: runs of ``[hold, record]``, all started at once. The hold answers
  ``holdFor`` (3 to 6 s, spread evenly over the runs, so after the start burst one step falls
  due every ~15 ms) and the runner sets the record step's ``due_at``; the record step notes the
  instant it is dispatched. Lateness = dispatch instant - ``due_at`` (both naive UTC from the
  same clock). The holds outlast the start burst, so what is measured is the loop's next-wake
  sleeps and ticks serving due steps, not the cost of starting runs.
* **Cue latency**: runs of ``[park, record]`` whose first step parks (``await: human``). Once
  all are parked the bench confirms them one at a time, through ``Controls(on_change=
  loop.nudge)`` as the bot does, with idle gaps in between; latency = confirm returned ->
  record step dispatched (monotonic clock).

The baseline of both is the issue's target itself (ratio = measured / target).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.backends import Backend, fresh_engine
from bench.results import Options, Result, median, percentile
from bench.workloads import bench_action, publish, registry_of
from runner.clock import utcnow
from runner.controls import Controls
from runner.engine import Runner, serving_settings
from runner.history import Actor
from runner.loop import RunnerLoop
from runner.registry import ActionRegistry, Envelope
from runner.schema import steps
from tests.support.definitions import event, phase, step

LATENESS_P99_MS = 250.0
HOLD_MIN = 3.0
HOLD_SPREAD = 3.0
CUE_P95_MS = 100.0


class Recorder:
    """The bench's actions: a hold whose length depends on the run, a park, and a record step
    that notes when it was dispatched."""

    def __init__(self) -> None:
        self.dispatched_at: dict[int, dt.datetime] = {}
        self.dispatched_mono: dict[int, float] = {}
        self.events: dict[int, asyncio.Event] = {}

    def event(self, run_id: int) -> asyncio.Event:
        return self.events.setdefault(run_id, asyncio.Event())

    async def hold(self, envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        return {"ok": True, "holdFor": HOLD_MIN + (envelope.run_id * 0.6180339887 % 1.0) * HOLD_SPREAD}

    async def park(self, envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        return {"ok": True, "await": "human"}

    async def record(self, envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        self.dispatched_mono[envelope.run_id] = time.monotonic()
        self.dispatched_at[envelope.run_id] = utcnow()
        self.event(envelope.run_id).set()
        return {"ok": True}

    def registry(self) -> ActionRegistry:
        return registry_of(
            bench_action("bench.hold", self.hold),
            bench_action("bench.park", self.park),
            bench_action("bench.record", self.record),
        )


@contextlib.asynccontextmanager
async def serving(engine: AsyncEngine, registry: ActionRegistry) -> AsyncIterator[RunnerLoop]:
    """The runner in its real loop, as a task, for the duration of the block."""
    runner = Runner(engine, registry, owner="bench", settings=serving_settings(5))
    loop = RunnerLoop(runner, interval=5)
    task = asyncio.create_task(loop.run_forever())
    try:
        yield loop
    finally:
        loop.stop()
        await asyncio.wait_for(task, timeout=30)
        await runner.aclose()


async def _publish_in_scopes(
    engine: AsyncEngine, registry: ActionRegistry, key: str, actions: list[str], samples: int
) -> None:
    """One definition of ``actions`` in ``samples`` scopes: starting it makes one run each."""
    scopes = [f"s{i}" for i in range(samples)]
    await publish(engine, event(key, phase("main", *map(step, actions)), scopes=scopes), registry)


async def _start(engine: AsyncEngine, loop: RunnerLoop, key: str) -> tuple[Controls, list[int]]:
    """Start every scope's run through controls that nudge the serving loop, as the bot's do."""
    controls = Controls(engine, on_change=loop.nudge)
    started = await controls.start(key, actor=Actor(None, "bench"))
    assert started.ok, started.message
    return controls, list(started.run_ids)


async def _wait_for_all(recorder: Recorder, run_ids: list[int]) -> None:
    for run_id in run_ids:
        await recorder.event(run_id).wait()


async def measure_lateness(backend: Backend, samples: int) -> dict[str, Any]:
    recorder = Recorder()
    registry = recorder.registry()
    async with fresh_engine(backend) as engine:
        await _publish_in_scopes(engine, registry, "late", ["bench.hold", "bench.record"], samples)
        async with serving(engine, registry) as loop:
            _, run_ids = await _start(engine, loop, "late")
            async with asyncio.timeout(60):
                await _wait_for_all(recorder, run_ids)
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(steps.c.run_id, steps.c.due_at, steps.c.created_at).where(
                        steps.c.action_id == "bench.record"
                    )
                )
            ).all()
            held = (
                await conn.execute(
                    sa.select(sa.func.max(steps.c.finished_at)).where(steps.c.action_id == "bench.hold")
                )
            ).scalar()
    due = {int(r.run_id): r.due_at for r in rows}
    return {
        "lateness": [(recorder.dispatched_at[r] - due[r]).total_seconds() * 1000 for r in run_ids],
        # Dues that fell before the last hold was settled overlapped the start burst.
        "during_burst": sum(1 for r in run_ids if due[r] <= held),
        "ticks": loop.state.ticks,
    }


async def measure_cue_latency(backend: Backend, samples: int) -> list[float]:
    recorder = Recorder()
    registry = recorder.registry()
    rng = random.Random(5)
    async with fresh_engine(backend) as engine:
        await _publish_in_scopes(engine, registry, "cue", ["bench.park", "bench.record"], samples)
        async with serving(engine, registry) as loop:
            controls, _ = await _start(engine, loop, "cue")
            async with asyncio.timeout(60):
                parked = await _parked_steps(engine, samples)
            latencies = []
            for run_id, step_id in parked:
                # Idle gaps: the loop is asleep (up to its 5 s interval) when the confirm lands.
                await asyncio.sleep(rng.uniform(0.02, 0.12))
                confirmed = await controls.confirm(step_id, actor=Actor(None, "bench"))
                assert confirmed.ok, confirmed.message
                returned = time.monotonic()
                await asyncio.wait_for(recorder.event(run_id).wait(), timeout=30)
                latencies.append((recorder.dispatched_mono[run_id] - returned) * 1000)
    return latencies


async def _parked_steps(engine: AsyncEngine, expected: int) -> list[tuple[int, int]]:
    query = sa.select(steps.c.run_id, steps.c.id).where(
        steps.c.action_id == "bench.park", steps.c.status == "running", steps.c.claim_expires_at.is_(None)
    )
    while True:
        async with engine.connect() as conn:
            rows = (await conn.execute(query.order_by(steps.c.run_id))).all()
        if len(rows) == expected:
            return [(int(r.run_id), int(r.id)) for r in rows]
        await asyncio.sleep(0.1)


async def run(backend: Backend, options: Options) -> list[Result]:
    wait_samples = 40 if options.quick else 200
    cue_samples = 20 if options.quick else 60
    # At most 3 repeats: each already holds hundreds of samples, and each costs ~15 s.
    repeats = 1 if options.quick else max(1, min(options.repeats, 3))
    late_p50, late_p99, late_max = [], [], []
    cue_p50, cue_p95, cue_max = [], [], []
    early = overlapped = 0
    for _ in range(repeats):
        measured = await measure_lateness(backend, wait_samples)
        lateness = measured["lateness"]
        overlapped += measured["during_burst"]
        early += sum(1 for v in lateness if v < 0)
        late_p50.append(percentile(lateness, 50))
        late_p99.append(percentile(lateness, 99))
        late_max.append(max(lateness))
        cue = await measure_cue_latency(backend, cue_samples)
        cue_p50.append(percentile(cue, 50))
        cue_p95.append(percentile(cue, 95))
        cue_max.append(max(cue))
    p99 = median(late_p99)
    p95 = median(cue_p95)
    return [
        Result(
            "wait lateness p99 (real loop)",
            backend.name,
            f"p99 {p99:.1f} ms (p50 {median(late_p50):.1f})",
            f"{LATENESS_P99_MS:.0f} ms target",
            p99 / LATENESS_P99_MS,
            "p99 <= 250 ms",
            p99 <= LATENESS_P99_MS and early == 0,
            [
                f"{wait_samples} runs per repeat, {repeats} repeats; per repeat p50/p99/max (ms): "
                + "; ".join(
                    f"{a:.1f}/{b:.1f}/{c:.1f}" for a, b, c in zip(late_p50, late_p99, late_max, strict=True)
                )
                + f"; dispatched before due: {early}; due during the start burst: {overlapped}"
            ],
        ),
        Result(
            "cue confirm -> next step p95",
            backend.name,
            f"p95 {p95:.1f} ms (p50 {median(cue_p50):.1f})",
            f"{CUE_P95_MS:.0f} ms target",
            p95 / CUE_P95_MS,
            "p95 <= 100 ms",
            p95 <= CUE_P95_MS,
            [
                f"{cue_samples} confirms per repeat, {repeats} repeats; per repeat p50/p95/max (ms): "
                + "; ".join(
                    f"{a:.1f}/{b:.1f}/{c:.1f}" for a, b, c in zip(cue_p50, cue_p95, cue_max, strict=True)
                )
            ],
        ),
    ]
