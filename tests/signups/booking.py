"""A run booked for an event with a sign-up, on a real database: what every sign-up test starts
from."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.definitions import EventDefinition
from runner.history import Actor
from tests.support.definitions import event, phase, wait

T0 = dt.datetime(2026, 9, 2, 12, 0, 0)
# The run starts a day after T0: sign-ups are open at T0.
STARTS = T0 + dt.timedelta(days=1)


def raid(signup: dict[str, Any], key: str = "raid") -> dict[str, Any]:
    return event(key, phase("main", wait("1m")), title="Raid", signup=signup)


async def book(
    engine: AsyncEngine, signup: dict[str, Any], *, key: str = "raid", starts: dt.datetime = STARTS
) -> int:
    """Publish the event and create its run, scheduled for ``starts``; the run's id."""
    await catalog.publish(engine, EventDefinition.model_validate(raid(signup, key)), T0)
    async with engine.begin() as conn:
        current = await catalog.current(conn, key, catalog.VersionCache())
        run_id = await catalog.create_run(conn, current, "", starts, T0, actor=Actor(None, "test"))
    assert run_id is not None
    return run_id


def member(n: int) -> tuple[str, str]:
    return (f"1000000000000000{n:02d}", f"member{n}")
