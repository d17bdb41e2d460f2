"""Two runner instances with different owner ids tick one database at the same time, each
through its own engine (its own pool, so truly concurrent connections). Over 240 runs, every
step is dispatched exactly once, and no concurrency key is ever held by two runs at once.

On MariaDB this is the claim statements' contract under real contention; on SQLite it is the
``BEGIN IMMEDIATE`` queueing between two processes' worth of connections.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner import definitions as defs
from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from runner.engine import Runner, RunnerSettings
from runner.history import Actor
from runner.registry import ActionRegistry, Envelope
from runner.schema import runs
from tests.support.actions import build_action
from tests.support.definitions import event, phase, step

# 240 runs ticked by two runners at once, on both backends.
pytestmark = pytest.mark.slow

RUNS = 240
STEPS_PER_RUN = 3
KEYS = 12  # every key is shared by 20 runs: they must take turns


class NoParams(BaseModel):
    pass


def build_registry(dispatches: list[dict[str, Any]]) -> ActionRegistry:
    async def perform(envelope: Envelope, params: BaseModel) -> dict[str, bool]:
        started = time.monotonic()
        await asyncio.sleep(random.uniform(0, 0.003))
        dispatches.append(
            {
                "step": envelope.step_id,
                "run": envelope.run_id,
                "key": envelope.idempotency_key,
                "start": started,
                "end": time.monotonic(),
            }
        )
        return {"ok": True}

    registry = ActionRegistry()
    registry.register(
        "race",
        [
            build_action(
                "race.step", perform, budget_ms=5000, params_model=NoParams, risk="none", label="race step"
            )
        ],
    )
    return registry


async def test_two_runners_dispatch_every_step_exactly_once(engine: AsyncEngine) -> None:
    race_step = step("race.step", on_failure=None)
    spec = event(
        "race",
        phase("one", *[race_step] * 2),
        phase("two", *[race_step] * (STEPS_PER_RUN - 2)),
        scopes=[f"s{i}" for i in range(RUNS)],
        concurrency_key="k{scope}",
    )
    # Keys are per scope in the template; fold them onto KEYS shared keys after creation.
    dispatches: list[dict[str, Any]] = []
    registry = build_registry(dispatches)
    definition = defs.validate(spec, registry)
    clock = SystemClock()
    await catalog.publish(engine, definition, clock.now())
    started = await Controls(engine, clock=clock).start("race", actor=Actor(None, "test"))
    assert len(started.run_ids) == RUNS
    async with engine.begin() as conn:
        for run_id in started.run_ids:
            await conn.execute(
                sa.update(runs).where(runs.c.id == run_id).values(concurrency_key=f"key{run_id % KEYS}")
            )

    url = engine.url.render_as_string(hide_password=False)
    settings = RunnerSettings(concurrent_runs=16, steps_per_tick=2)
    engines = [create_engine(url), create_engine(url)]
    runners = [
        Runner(e, registry, clock=clock, owner=f"runner-{i}", settings=settings)
        for i, e in enumerate(engines)
    ]

    dispatched_by: Counter[str] = Counter()

    async def keep_ticking(runner: Runner) -> None:
        deadline = time.monotonic() + 600  # generous: CI machines are shared
        while time.monotonic() < deadline:
            dispatched_by[runner.owner] += (await runner.tick()).steps_dispatched
            async with runner.engine.connect() as conn:
                open_runs = (
                    await conn.execute(
                        sa.select(sa.func.count()).select_from(runs).where(runs.c.status != "completed")
                    )
                ).scalar()
            if open_runs == 0:
                return
            await asyncio.sleep(random.uniform(0, 0.002))

    try:
        await asyncio.gather(*(keep_ticking(r) for r in runners))
    finally:
        for e in engines:
            await e.dispose()

    async with engine.connect() as conn:
        statuses = Counter((await conn.execute(sa.select(runs.c.status))).scalars().all())
    assert statuses == {"completed": RUNS}

    per_step = Counter(d["step"] for d in dispatches)
    assert len(per_step) == RUNS * STEPS_PER_RUN, "every step dispatched"
    twice = {step: n for step, n in per_step.items() if n != 1}
    assert twice == {}, f"steps dispatched more than once: {twice}"
    assert sum(dispatched_by.values()) == RUNS * STEPS_PER_RUN
    assert all(dispatched_by[r.owner] > 0 for r in runners), f"both runners must have raced: {dispatched_by}"

    # No key held by two runs at once: per key, the runs' dispatch windows never overlap.
    windows: dict[int, list[float]] = defaultdict(lambda: [float("inf"), float("-inf")])
    for d in dispatches:
        window = windows[d["run"]]
        window[0], window[1] = min(window[0], d["start"]), max(window[1], d["end"])
    by_key: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for run_id, (start, end) in windows.items():
        by_key[run_id % KEYS].append((start, end))
    for key, spans in by_key.items():
        spans.sort()
        for (_, first_end), (second_start, _) in itertools.pairwise(spans):
            assert second_start >= first_end, f"key{key} was held by two runs at once"
