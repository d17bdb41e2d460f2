"""A test world: the real engine, controls and SQL on a real database, with scripted actions
whose answers each test dictates (the seeds' ``scriptedAction``)."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.bus import RunsChanged
from runner.clock import ManualClock
from runner.controls import Controls
from runner.definitions import EventDefinition
from runner.engine import Runner, RunnerSettings, TickReport
from runner.history import Actor
from runner.registry import Action, ActionRegistry
from runner.schema import definitions, run_log, runs, steps
from tests.support.actions import Scripted
from tests.support.definitions import event, phase, step

# ``phase`` and ``step`` are the definition factory's, importable from here as before.
__all__ = ["T0", "World", "later", "phase", "step"]

T0 = dt.datetime(2026, 9, 2, 12, 0, 0)


def later(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


class World:
    def __init__(
        self, engine: AsyncEngine, *, settings: RunnerSettings | None = None, owner: str = "host:test"
    ) -> None:
        self.engine = engine
        self.clock = ManualClock(T0)
        self.registry = ActionRegistry()
        self.scripted = Scripted()
        self.runner = Runner(engine, self.registry, clock=self.clock, owner=owner, settings=settings)
        # Wired as the composition root wires them: a control's change goes out on the bus.
        self.controls = Controls(
            engine,
            clock=self.clock,
            versions=self.runner.versions,
            on_change=functools.partial(self.runner.bus.publish, RunsChanged()),
        )
        self._definitions = 0

    def register(self, *actions: Action, owner: str = "test") -> None:
        self.registry.register(owner, actions)

    async def tick(self, at: dt.datetime | None = None) -> TickReport:
        if at is not None:
            self.clock.set(at)
        return await self.runner.tick()

    async def publish(self, spec: dict[str, Any]) -> catalog.Published:
        """Publish without checking params against the registry (a seeded run may name an
        action that is no longer loaded, as after a module was removed)."""
        return await catalog.publish(self.engine, EventDefinition.model_validate(spec), self.clock.now())

    async def seed_run(
        self,
        phases: list[dict[str, Any]],
        *,
        scheduled_for: dt.datetime = T0,
        grace_seconds: int = 900,
        concurrency_key: str | None = None,
        status: str = "scheduled",
        scope: str = "",
    ) -> int:
        self._definitions += 1
        spec = event(
            f"seed-{self._definitions}",
            *phases,
            title=f"Seeded event {self._definitions}",
            grace_seconds=grace_seconds,
            concurrency_key=concurrency_key,
            scopes=[scope] if scope else [],
        )
        published = await self.publish(spec)
        async with self.engine.begin() as conn:
            current = await catalog.current(conn, published.key, self.runner.versions)
            run_id = await catalog.create_run(
                conn, current, scope, scheduled_for, self.clock.now(), actor=Actor(None, "seed")
            )
            assert run_id is not None
            if status != "scheduled":
                await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(status=status))
        return run_id

    async def run(self, run_id: int) -> sa.RowMapping:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(runs).where(runs.c.id == run_id))).mappings().first()
        assert row is not None
        return row

    async def steps_of(self, run_id: int) -> list[sa.RowMapping]:
        async with self.engine.connect() as conn:
            query = sa.select(steps).where(steps.c.run_id == run_id).order_by(steps.c.id)
            return list((await conn.execute(query)).mappings().all())

    async def log(self, run_id: int) -> list[sa.RowMapping]:
        async with self.engine.connect() as conn:
            query = sa.select(run_log).where(run_log.c.run_id == run_id).order_by(run_log.c.id)
            return list((await conn.execute(query)).mappings().all())

    async def kinds(self, run_id: int) -> list[str]:
        return [line["kind"] for line in await self.log(run_id)]

    async def set_step(self, step_id: int, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.update(steps).where(steps.c.id == step_id).values(**values))

    async def set_definitions_materialised_until(self, value: dt.datetime | None) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.update(definitions).values(materialised_until=value))

    async def set_run(self, run_id: int, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(**values))
