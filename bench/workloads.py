"""What the benchmarks run: bench-only actions, definitions published through the real catalog,
and a bulk seeder of dormant runs written straight into the tables.

The actions and definitions come from the tests' one action builder (``tests.support.actions``)
and one definition factory (``tests.support.definitions``), so a field the registry or the
definition format gains is filled in one place for tests and benchmarks alike.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner import definitions as defs
from runner.clock import utcnow
from runner.registry import Action, ActionRegistry, Envelope
from runner.schema import run_log, runs, steps
from runner.sql.steps import new_idempotency_key
from tests.support.actions import build_action
from tests.support.definitions import announce, cron, cue, event, phase, wait

# ── Bench-only actions ────────────────────────────────────────────────────


def bench_action(action_id: str, perform: Callable[[Envelope, BaseModel], Awaitable[Any]]) -> Action:
    """A 5 s budget: the step's timeout and the length of its lease (a longer step lease can
    cost the run a lease renewal), the figure every result in ``RESULTS.md`` was measured with."""
    return build_action(action_id, perform, budget_ms=5000, risk="none")


def registry_of(*actions: Action) -> ActionRegistry:
    registry = ActionRegistry()
    registry.register("bench", actions)
    return registry


async def publish(engine: AsyncEngine, raw: dict[str, Any], registry: ActionRegistry) -> catalog.Published:
    return await catalog.publish(engine, defs.validate(raw, registry), utcnow())


async def count_runs(engine: AsyncEngine, status: str) -> int:
    async with engine.connect() as conn:
        query = sa.select(sa.func.count()).select_from(runs).where(runs.c.status == status)
        return int((await conn.execute(query)).scalar() or 0)


# ── Dormant runs, straight into the tables ────────────────────────────────

# A realistic show: announce, wait an hour, cue a GM, announce again.
SHOW_STEPS: list[dict[str, Any]] = [
    announce("The invasion of {scope} begins", on_failure="skip"),
    wait("1h", on_failure="skip"),
    cue("Open the gate in {scope}", on_failure="skip"),
    announce("{scope} is saved", on_failure="skip"),
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
        ("weekly-raid", cron("0 20 * * 5", "Europe/Berlin")),
    ):
        raw = event(key, phase("main", *SHOW_STEPS), schedule=schedule)
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
        for seq, (show_step, status) in enumerate(zip(SHOW_STEPS, statuses, strict=True)):
            settled = status in ("done", "running")
            step_rows.append(
                {
                    "run_id": run_id,
                    "phase": "main",
                    "seq": seq,
                    "action_id": show_step["action"],
                    "params": show_step["params"],
                    "status": status,
                    "due_at": due[seq],
                    "attempts": 1 if settled else 0,
                    "on_failure": show_step["on_failure"],
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
