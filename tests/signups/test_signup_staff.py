"""Staff change sign-ups (issue 28 item 3) through the same rules as a click, on both backends:
an add takes a seat or a place in line past the closing time and whatever roles, a move frees
the old seat and promotes the first member waiting once, a removal is not the member's late
cancel, a close stops clicks under the run's lock and a reopen keeps them open until the run
ends; every change is a run-log line naming who did it."""

from __future__ import annotations

import asyncio
import datetime as dt

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import signup_staff, signups
from runner.bus import LocalEventBus
from runner.history import Actor
from runner.signup_desk import SignupDesk
from runner.signups import Confirmed, Left, Moved, NotSignedUp, Refused, RefusedWhy, Waitlisted
from runner.states import SignupOverride, SignupStatus
from runner.views import log_for_run
from tests.signups.booking import STARTS, T0, book, member

SLOTS = {
    "options": {"tank": 1, "dps": 2},
    "capacity": 3,
    "closes": "1h",
    "late_cancel": "2h",
    "roles": ["raider"],
}
MOD = Actor("900000000000000001", "mod")
# After the closing time (an hour before the start).
CLOSED_AT = STARTS - dt.timedelta(minutes=30)


def who(n: int) -> Actor:
    return Actor(*member(n))


async def click(engine: AsyncEngine, run_id: int, n: int, option: str, at: dt.datetime = T0) -> object:
    return await signups.join(engine, run_id, *member(n), option, ("raider",), at)


async def test_staff_add_past_the_closing_time_and_without_the_role_but_within_capacity(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, SLOTS)
    assert await signups.join(engine, run_id, *member(1), "tank", (), T0) == Refused(
        RefusedWhy.NOT_ALLOWED_ROLE, needed=("raider",)
    )
    assert await signups.by_staff(engine, run_id, who(1), "tank", MOD, CLOSED_AT) == Confirmed("tank", 1)
    # The option's one seat is taken: staff are held to capacity and the waiting list too.
    assert await signups.by_staff(engine, run_id, who(2), "tank", MOD, CLOSED_AT) == Waitlisted("tank", 1, 2)
    [added, waiting] = [e for e in await log_for_run(engine, run_id) if e.kind == "signup.by_staff"]
    assert added.actor == MOD and added.event.detail() == {
        "member_id": member(1)[0],
        "member_name": "member1",
        "change": "added",
        "option": "tank",
        "status": "confirmed",
    }
    assert waiting.event.detail()["status"] == "waitlisted"


async def test_staff_move_frees_the_seat_and_promotes_the_first_member_waiting_once(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, SLOTS)
    await click(engine, run_id, 1, "tank")
    await click(engine, run_id, 2, "tank")
    answer = await signups.by_staff(engine, run_id, who(1), "dps", MOD, T0, moving=True)
    assert isinstance(answer, Moved) and answer.from_option == "tank" and answer.now == Confirmed("dps", 3)
    assert answer.promoted is not None and answer.promoted.member_id == member(2)[0]
    listed = await signups.listing(engine, run_id)
    assert listed is not None
    assert {(s.member_name, s.option) for s in listed.confirmed} == {("member1", "dps"), ("member2", "tank")}
    kinds = [e.kind for e in await log_for_run(engine, run_id)]
    assert kinds.count("signup.promoted") == 1 and kinds.count("signup.by_staff") == 1


async def test_staff_move_of_a_member_not_signed_up_changes_nothing(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    await click(engine, run_id, 1, "tank")
    assert await signups.by_staff(engine, run_id, who(2), "dps", MOD, T0, moving=True) == NotSignedUp()
    listed = await signups.listing(engine, run_id)
    assert listed is not None and [s.member_name for s in listed.confirmed] == ["member1"]
    assert "signup.by_staff" not in [e.kind for e in await log_for_run(engine, run_id)]


async def test_staff_removal_promotes_once_and_is_not_the_members_late_cancel(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    await click(engine, run_id, 1, "tank")
    await click(engine, run_id, 2, "tank")
    late = STARTS - dt.timedelta(minutes=20)
    answer = await signups.leave(engine, run_id, *member(1), late, staff=MOD)
    assert isinstance(answer, Left) and not answer.late and answer.promoted is not None
    log = await log_for_run(engine, run_id)
    assert [e.kind for e in log].count("signup.late_cancel") == 0
    [removed] = [e for e in log if e.kind == "signup.by_staff"]
    assert removed.actor == MOD and removed.event.detail()["change"] == "removed"


async def test_a_close_refuses_the_next_click_and_a_reopen_keeps_sign_ups_open_until_the_run_ends(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, SLOTS)
    assert await signup_staff.override(engine, run_id, SignupOverride.CLOSED, MOD, T0) is True
    assert await signup_staff.override(engine, run_id, SignupOverride.CLOSED, MOD, T0) is False
    refused = await click(engine, run_id, 1, "tank")
    assert isinstance(refused, Refused) and refused.why == RefusedWhy.CLOSED
    listed = await signups.listing(engine, run_id)
    assert listed is not None and listed.is_closed(T0) and listed.override == SignupOverride.CLOSED
    # Reopened, a click after the definition's closing time is taken.
    assert await signup_staff.override(engine, run_id, SignupOverride.OPEN, MOD, T0) is True
    assert await click(engine, run_id, 1, "tank", CLOSED_AT) == Confirmed("tank", 1)
    lines = [e for e in await log_for_run(engine, run_id) if e.kind == "signup.override"]
    assert [(e.event.detail()["override"], e.actor) for e in lines] == [("closed", MOD), ("open", MOD)]


async def test_a_close_racing_clicks_seats_nobody_after_it_committed(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS | {"options": {"dps": None}, "capacity": None})
    bus = LocalEventBus()
    desk = SignupDesk(engine, bus)
    await click(engine, run_id, 1, "dps")  # the pools exist: the race is on the lock alone
    clicks = [click(engine, run_id, n, "dps") for n in range(2, 12)]
    results = await asyncio.gather(desk.override(run_id, SignupOverride.CLOSED, MOD, T0), *clicks)
    listed = await signups.listing(engine, run_id)
    assert listed is not None
    # Every click either got in before the close took the run's lock or was refused as closed:
    # none lost, none half done, and nothing is seated once the close has committed.
    seated = {s.member_name for s in listed.confirmed}
    refused = [r for r in results[1:] if isinstance(r, Refused)]
    assert len(seated) + len(refused) == 11
    assert all(r.why == RefusedWhy.CLOSED for r in refused)
    assert results[0] is True
    late = await click(engine, run_id, 20, "dps")
    assert isinstance(late, Refused) and late.why == RefusedWhy.CLOSED


async def test_staff_changes_publish_so_the_list_and_the_staff_log_follow(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    bus = LocalEventBus()
    seen: list[object] = []
    bus.subscribe(seen.append)
    desk = SignupDesk(engine, bus)
    await desk.add_by_staff(run_id, who(1), "tank", MOD, T0)
    await desk.remove_by_staff(run_id, who(2), MOD, T0)  # not signed up: nothing changed
    names = [type(e).__name__ for e in seen]
    assert names == ["SignupsChanged", "StaffChangedSignups"]
    assert SignupStatus.CONFIRMED == (await signups.listing(engine, run_id)).confirmed[0].status  # type: ignore[union-attr]
