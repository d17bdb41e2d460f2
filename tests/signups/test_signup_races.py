"""The capacity race on a real MariaDB: ten members click at once on a sign-up of five seats,
through two engines (two pools of connections, as two bot processes have). Exactly five get a
seat and five wait, and the positions are the order the database served the clicks in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import signup_messages
from runner import signups
from runner.db import CONFLICTS, create_engine
from runner.schema import signup_pools
from runner.signups import Confirmed, Waitlisted
from runner.states import SignupStatus
from tests.signups.booking import T0, book, member

pytestmark = pytest.mark.mariadb

ROUNDS = 5
CLICKS = 10
CAPACITY = 5


@pytest.fixture(params=["mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def second_engine(engine: AsyncEngine, mariadb_database: str) -> AsyncIterator[AsyncEngine]:
    other = create_engine(mariadb_database)
    try:
        yield other
    finally:
        await other.dispose()


async def check_round(engine: AsyncEngine, run_id: int, answers: list[object]) -> list[int]:
    confirmed = [a for a in answers if isinstance(a, Confirmed)]
    waitlisted = [a for a in answers if isinstance(a, Waitlisted)]
    assert (len(confirmed), len(waitlisted)) == (CAPACITY, CLICKS - CAPACITY), answers
    positions = sorted(a.position for a in [*confirmed, *waitlisted])
    assert positions == list(range(1, CLICKS + 1)), "one click number each, none lost or shared"
    # The first five clicks the database served have the seats; the rest wait in that order.
    assert sorted(a.position for a in confirmed) == positions[:CAPACITY]
    assert sorted((a.position, a.place) for a in waitlisted) == [
        (p, place) for place, p in enumerate(positions[CAPACITY:], start=1)
    ]
    listed = await signups.listing(engine, run_id)
    assert listed is not None
    assert [s.position for s in listed.confirmed] == positions[:CAPACITY]
    assert [s.position for s in listed.waitlisted] == positions[CAPACITY:]
    async with engine.connect() as conn:
        taken = (await conn.execute(sa.select(signup_pools.c.pool, signup_pools.c.taken))).all()
    assert dict(taken) == {"*": CAPACITY, "going": CAPACITY}
    return positions


async def _click_at(
    n: int, run_id: int, start: asyncio.Event, engines: tuple[AsyncEngine, AsyncEngine]
) -> object:
    await start.wait()
    member_id, name = member(n)
    return await signups.join(engines[n % 2], run_id, member_id, name, "going", (), T0)


async def test_ten_clicks_at_once_on_five_seats_from_two_engines_give_five_seats_and_five_waiting(
    engine: AsyncEngine, second_engine: AsyncEngine
) -> None:
    gave_up = CONFLICTS.gave_up
    engines = (second_engine, engine)
    for round_ in range(ROUNDS):
        run_id = await book(engine, {"options": {"going": CAPACITY}}, key=f"raid-{round_}")
        start = asyncio.Event()
        tasks = [asyncio.create_task(_click_at(n, run_id, start, engines)) for n in range(CLICKS)]
        await asyncio.sleep(0)
        start.set()
        await check_round(engine, run_id, list(await asyncio.gather(*tasks)))
    assert CONFLICTS.gave_up == gave_up, "no click may be lost to a lock conflict"


async def test_clicks_a_moment_apart_from_two_engines_are_served_in_click_order(
    engine: AsyncEngine, second_engine: AsyncEngine
) -> None:
    run_id = await book(engine, {"options": {"going": CAPACITY}})

    async def click(n: int) -> object:
        await asyncio.sleep(n * 0.05)
        member_id, name = member(n)
        via = engine if n % 2 else second_engine
        return await signups.join(via, run_id, member_id, name, "going", (), T0)

    answers = list(await asyncio.gather(*(click(n) for n in range(CLICKS))))
    await check_round(engine, run_id, answers)
    assert [a.position for a in answers] == list(range(1, CLICKS + 1))  # type: ignore[attr-defined]
    listed = await signups.listing(engine, run_id)
    assert listed is not None
    assert [s.member_name for s in listed.confirmed] == [f"member{n}" for n in range(CAPACITY)]
    assert [s.member_name for s in listed.waitlisted] == [f"member{n}" for n in range(CAPACITY, CLICKS)]
    assert all(s.status == SignupStatus.WAITLISTED for s in listed.waitlisted)


async def test_leaves_and_joins_at_once_never_leave_a_seat_free_while_someone_waits(
    engine: AsyncEngine, second_engine: AsyncEngine
) -> None:
    """Five seated, five waiting; the five seated leave while five more click, all at once: the
    database serialises them, so however they interleave no seat stays empty while a member
    waits, and each promotion has its one notice."""
    run_id = await book(engine, {"options": {"going": CAPACITY}})
    for n in range(CLICKS):
        member_id, name = member(n)
        await signups.join(engine, run_id, member_id, name, "going", (), T0)
    start = asyncio.Event()

    async def leave(n: int) -> object:
        await start.wait()
        member_id, name = member(n)
        return await signups.leave(engine if n % 2 else second_engine, run_id, member_id, name, T0)

    async def join(n: int) -> object:
        await start.wait()
        member_id, name = member(n)
        return await signups.join(
            second_engine if n % 2 else engine, run_id, member_id, name, "going", (), T0
        )

    tasks = [asyncio.create_task(leave(n)) for n in range(CAPACITY)]
    tasks += [asyncio.create_task(join(n)) for n in range(CLICKS, CLICKS + CAPACITY)]
    await asyncio.sleep(0)
    start.set()
    answers = await asyncio.gather(*tasks)
    promotions = [a.promoted for a in answers[:CAPACITY] if isinstance(a, signups.Left) and a.promoted]
    listed = await signups.listing(engine, run_id)
    assert listed is not None
    assert len(listed.confirmed) == CAPACITY and len(listed.waitlisted) == CAPACITY
    # The waiting list is served in position order: everyone seated clicked before everyone waiting.
    assert max(s.position for s in listed.confirmed) < min(s.position for s in listed.waitlisted)
    async with engine.connect() as conn:
        notices = await signup_messages.sql.notices_for_run(conn, run_id)
    assert sorted(n["member_id"] for n in notices) == sorted(p.member_id for p in promotions)
    assert len({n["member_id"] for n in notices}) == len(notices)


async def test_a_departure_seen_by_two_processes_at_once_promotes_once(
    engine: AsyncEngine, second_engine: AsyncEngine
) -> None:
    """A member who left the server, found by both processes at once (a work lease handed over
    between two passes: the new holder asks about everyone again): the leave goes through the
    click's own transaction, so one seat is freed, one member promoted, one notice written."""
    from runner import history
    from runner.bus import LocalEventBus
    from runner.signup_desk import SignupDesk

    for round_ in range(ROUNDS):
        run_id = await book(engine, {"options": {"going": 1}}, key=f"raid-{round_}")
        for n in range(3):
            member_id, name = member(n)
            await signups.join(engine, run_id, member_id, name, "going", (), T0)
        gone, name = member(0)
        start = asyncio.Event()

        async def found_gone(via: AsyncEngine, start: asyncio.Event, gone: str, name: str) -> list[object]:
            await start.wait()
            return list(await SignupDesk(via, LocalEventBus()).left_the_server(gone, name, T0))

        tasks = [asyncio.create_task(found_gone(via, start, gone, name)) for via in (engine, second_engine)]
        await asyncio.sleep(0)
        start.set()
        answers = [a for found in await asyncio.gather(*tasks) for a in found]
        left = [a for a in answers if isinstance(a, signups.Left)]
        assert len(left) == 1 and left[0].promoted is not None, answers
        assert left[0].promoted.member_id == member(1)[0]
        listed = await signups.listing(engine, run_id)
        assert listed is not None
        assert [s.member_id for s in listed.confirmed] == [member(1)[0]]
        assert [s.member_id for s in listed.waitlisted] == [member(2)[0]]
        async with engine.connect() as conn:
            notices = await signup_messages.sql.notices_for_run(conn, run_id)
            logged = await history.entries_for_run(conn, run_id)
        assert [n["member_id"] for n in notices] == [member(1)[0]]
        assert len([e for e in logged if isinstance(e.event, history.SignupPromoted)]) == 1
