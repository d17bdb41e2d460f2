"""The DM outbox of reminders to attendees (``bridge.reminder_dms``) on SQLite and a real
MariaDB: a reminder performed again writes no second row (the unique key, under MariaDB's
INSERT IGNORE too), several processes racing for the same rows each claim a row at most once,
only the claim's holder settles it, a row whose run started is dropped rather than sent late,
and a member's choice to turn reminders off is written over, not added to."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import reminder_dms
from runner.db import create_engine
from runner.schema import runs
from tests.support.world import T0, World, phase, step

PROCESSES = 4
MEMBERS = [f"{n:018d}" for n in range(1, 9)]


@pytest.fixture
async def engines(engine: AsyncEngine) -> AsyncIterator[list[AsyncEngine]]:
    url = engine.url.render_as_string(hide_password=False)
    others = [create_engine(url) for _ in range(PROCESSES - 1)]
    try:
        yield [engine, *others]
    finally:
        for other in others:
            await other.dispose()


async def a_run(engine: AsyncEngine, starts: dt.datetime) -> int:
    world = World(engine)
    return await world.seed_run([phase("main", step("test.noop"))], scheduled_for=starts)


async def test_a_reminder_performed_again_writes_each_members_row_once(engine: AsyncEngine) -> None:
    run_id = await a_run(engine, T0 + dt.timedelta(hours=1))
    first = await reminder_dms.queue(engine, run_id, 0, 7, MEMBERS, "soon", T0)
    again = await reminder_dms.queue(engine, run_id, 0, 7, [*MEMBERS, MEMBERS[0]], "soon", T0)
    assert first == again == (len(MEMBERS), 0)
    assert len(await reminder_dms.of_run(engine, run_id)) == len(MEMBERS)
    # Another reminder of the same run is its own row per member.
    await reminder_dms.queue(engine, run_id, 1, 8, MEMBERS[:1], "sooner", T0)
    assert len(await reminder_dms.of_run(engine, run_id)) == len(MEMBERS) + 1


async def test_processes_racing_claim_each_row_once_and_only_the_holder_settles(
    engines: list[AsyncEngine],
) -> None:
    engine = engines[0]
    run_id = await a_run(engine, T0 + dt.timedelta(hours=1))
    await reminder_dms.queue(engine, run_id, 0, 7, MEMBERS, "soon", T0)
    batches = await asyncio.gather(
        *(reminder_dms.claim_due(e, f"process-{i}", T0) for i, e in enumerate(engines))
    )
    claimed = [(dm.id, owner) for owner, batch in enumerate(batches) for dm in batch]
    assert sorted(dm_id for dm_id, _ in claimed) == sorted({dm_id for dm_id, _ in claimed})
    assert len(claimed) == len(MEMBERS)
    dm = next(dm for batch in batches for dm in batch)
    holder = next(f"process-{i}" for i, batch in enumerate(batches) if dm in batch)
    assert not await reminder_dms.settle(engine, dm, "someone-else", T0, via="dm")
    assert await reminder_dms.settle(engine, dm, holder, T0, via="dm")
    assert not await reminder_dms.settle(engine, dm, holder, T0, via="dm"), "settled once"
    # While the claims hold, nobody takes the rest; once they ran out, one process does.
    assert await reminder_dms.claim_due(engine, "late", T0 + dt.timedelta(seconds=1)) == []
    after = T0 + dt.timedelta(seconds=reminder_dms.LEASE_SECONDS + 1)
    assert len(await reminder_dms.claim_due(engine, "late", after)) == len(MEMBERS) - 1


async def test_a_row_whose_run_started_is_dropped_not_sent(engine: AsyncEngine) -> None:
    run_id = await a_run(engine, T0 + dt.timedelta(minutes=1))
    await reminder_dms.queue(engine, run_id, 0, 7, MEMBERS[:2], "soon", T0)
    async with engine.begin() as conn:
        await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(status="running"))
    assert await reminder_dms.claim_due(engine, "p", T0) == []
    rows = await reminder_dms.of_run(engine, run_id)
    assert {(row["settled_as"], row["last_error"]) for row in rows} == {
        ("dropped", reminder_dms.STARTED_NOTE)
    }


async def test_turning_reminders_off_and_on_is_one_row_per_member(engine: AsyncEngine) -> None:
    run_id = await a_run(engine, T0 + dt.timedelta(hours=1))
    member = MEMBERS[0]
    await reminder_dms.turn_reminders(engine, member, on=False, now=T0)
    await reminder_dms.turn_reminders(engine, member, on=False, now=T0)
    assert await reminder_dms.reminders_off(engine, member)
    assert await reminder_dms.queue(engine, run_id, 0, 7, MEMBERS[:2], "soon", T0) == (1, 1)
    await reminder_dms.turn_reminders(engine, member, on=True, now=T0)
    assert not await reminder_dms.reminders_off(engine, member)
