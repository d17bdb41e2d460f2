"""What ``/events`` reads (``runner.views.players``), on both backends: the open seats and the
member's own place agree with the sign-up store, a booked run of an event without a schedule is
coming too, and ``mine`` holds only the runs in flight the member is still on."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog, signups, views
from runner.definitions import SignupDefinition
from runner.schema import runs
from runner.states import RunStatus, SignupStatus
from runner.views.players import Place, Seats, open_seats
from tests.signups.booking import STARTS, T0, book, member

SLOTS = {"options": {"tank": 1, "dps": 2}, "capacity": 3, "channel": "announcements"}


async def join(engine: AsyncEngine, run_id: int, n: int, option: str) -> None:
    member_id, name = member(n)
    await signups.join(engine, run_id, member_id, name, option, (), T0)


def test_open_seats_are_the_fewer_of_what_the_options_and_the_event_have_left() -> None:
    capped = SignupDefinition.model_validate(SLOTS)
    assert open_seats(capped, {}) == 3
    assert open_seats(capped, {"tank": 1}) == 2, "the tank's seat is gone, dps has two"
    assert open_seats(capped, {"dps": 2}) == 1
    assert open_seats(capped, {"tank": 1, "dps": 2}) == 0
    unlimited = SignupDefinition.model_validate({"options": ["going"], "channel": "announcements"})
    assert open_seats(unlimited, {"going": 40}) is None
    overall = SignupDefinition.model_validate({"options": ["going"], "capacity": 5, "channel": "x-1"})
    assert open_seats(overall, {"going": 4}) == 1


async def test_coming_shows_the_seats_left_and_each_members_own_place(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    await join(engine, run_id, 1, "tank")
    await join(engine, run_id, 2, "tank")
    await join(engine, run_id, 3, "tank")
    await join(engine, run_id, 4, "dps")
    versions = catalog.VersionCache()

    (seated,) = await views.coming(engine, versions, T0, member(1)[0])
    assert (seated.key, seated.at, seated.run_id) == ("raid", STARTS, run_id), "booked by hand, still coming"
    assert seated.seats == Seats(open=1, waiting=2, booked=True, closed=False)
    assert seated.own == Place(SignupStatus.CONFIRMED, "tank")
    (second,) = await views.coming(engine, versions, T0, member(3)[0])
    assert second.own == Place(SignupStatus.WAITLISTED, "tank", 2)
    (stranger,) = await views.coming(engine, versions, T0, member(9)[0])
    assert stranger.own is None and stranger.seats == seated.seats


async def test_mine_holds_the_runs_in_flight_the_member_is_still_on(engine: AsyncEngine) -> None:
    first = await book(engine, SLOTS)
    other = await book(engine, SLOTS, key="other")
    ended = await book(engine, SLOTS, key="ended")
    for run_id in (first, other, ended):
        await join(engine, run_id, 1, "dps")
    versions = catalog.VersionCache()
    assert [c.run_id for c in await views.mine(engine, versions, T0, member(1)[0])] == [first, other, ended]

    await signups.leave(engine, other, *member(1), T0)
    async with engine.begin() as conn:
        await conn.execute(sa.update(runs).where(runs.c.id == ended).values(status=RunStatus.CANCELLED))
    (left,) = await views.mine(engine, versions, T0, member(1)[0])
    assert (left.run_id, left.own) == (first, Place(SignupStatus.CONFIRMED, "dps"))
    assert await views.mine(engine, versions, T0, member(2)[0]) == []
