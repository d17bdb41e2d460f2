"""``bridge.attendee_roles`` and ``bridge.threads`` on both backends: who should hold an
attendee role (confirmed in a live, non-rehearsal run whose sign-up names it; a role two runs
share kept while either holds the member), the grants recorded once, and a run's threads: the
announcement they go on, recorded once however often, archived only once the run has ended, and
their members kept to who holds a seat."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge import attendee_roles, threads
from bridge.attendee_roles import Grant
from bridge.threads import Announced, MembershipChanges, RunThreads
from runner import catalog, signups
from runner.clock import ManualClock
from runner.schema import runs, steps
from runner.states import StepStatus
from tests.signups.booking import STARTS, T0, book, member

ROLE_IDS = {"raiders": 444_444_444_444_444_444}
RAIDERS = str(ROLE_IDS["raiders"])
WITH_ROLE = {"options": ["going"], "attendee_role": "raiders"}


async def join(engine: AsyncEngine, run_id: int, n: int) -> None:
    member_id, name = member(n)
    await signups.join(engine, run_id, member_id, name, "going", (), T0)


async def end(engine: AsyncEngine, run_id: int, status: str = "completed") -> None:
    async with engine.begin() as conn:
        await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(status=status))


async def changes(engine: AsyncEngine) -> attendee_roles.Changes:
    return await attendee_roles.changes(engine, catalog.VersionCache(), ROLE_IDS)


async def test_confirmed_members_should_hold_the_role_until_they_leave_or_the_run_ends(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, WITH_ROLE)
    await join(engine, run_id, 1)
    await join(engine, run_id, 2)
    todo = await changes(engine)
    assert todo.add == [Grant(RAIDERS, member(1)[0]), Grant(RAIDERS, member(2)[0])] and todo.remove == []
    clock = ManualClock(T0)
    for grant in todo.add:
        await attendee_roles.granted(engine, grant, clock)
        await attendee_roles.granted(engine, grant, clock)  # a repeat records nothing new
    assert await changes(engine) == attendee_roles.Changes([], [])

    await signups.leave(engine, run_id, *member(2), T0)
    assert await changes(engine) == attendee_roles.Changes([], [Grant(RAIDERS, member(2)[0])])
    await attendee_roles.revoked(engine, Grant(RAIDERS, member(2)[0]))

    await end(engine, run_id)
    assert await changes(engine) == attendee_roles.Changes([], [Grant(RAIDERS, member(1)[0])])


async def test_a_role_two_runs_share_stays_while_either_holds_the_member(engine: AsyncEngine) -> None:
    early = await book(engine, WITH_ROLE, key="early")
    late = await book(engine, WITH_ROLE, key="late", starts=STARTS + dt.timedelta(days=1))
    await join(engine, early, 1)
    await join(engine, late, 1)
    assert (await changes(engine)).add == [Grant(RAIDERS, member(1)[0])], "one grant for both"
    await attendee_roles.granted(engine, Grant(RAIDERS, member(1)[0]), ManualClock(T0))
    await end(engine, early, "cancelled")
    assert await changes(engine) == attendee_roles.Changes([], [])


async def test_a_sign_up_without_an_attendee_role_or_with_an_alias_not_configured_grants_nothing(
    engine: AsyncEngine,
) -> None:
    plain = await book(engine, {"options": ["going"]}, key="plain")
    unknown = await book(engine, {"options": ["going"], "attendee_role": "ghosts"}, key="ghosts")
    await join(engine, plain, 1)
    await join(engine, unknown, 2)
    assert await changes(engine) == attendee_roles.Changes([], [])


async def test_only_a_role_the_bot_gave_is_taken_back(engine: AsyncEngine) -> None:
    """Held before: never taken back. Being given (Discord's answer not recorded): asked again
    while desired, taken back after. Stopped (a final answer): never asked again, nothing taken."""
    run_id = await book(engine, WITH_ROLE)
    for n in (1, 2, 3):
        await join(engine, run_id, n)
    held, pending, stopped = (Grant(RAIDERS, member(n)[0]) for n in (1, 2, 3))
    clock = ManualClock(T0)
    await attendee_roles.held(engine, held, clock)
    await attendee_roles.giving(engine, pending, clock)
    await attendee_roles.stopped(engine, stopped, clock, attendee_roles.REFUSED)
    assert await changes(engine) == attendee_roles.Changes([], [], retry=[pending])

    await end(engine, run_id)
    assert await changes(engine) == attendee_roles.Changes([], [pending], forget=[held, stopped])


async def posted_announcement(engine: AsyncEngine, run_id: int, label: str, message_id: str) -> int:
    """An announce step of the run, done, with where it was posted as the action reported it."""
    async with engine.begin() as conn:
        result = await conn.execute(
            sa.insert(steps).values(
                run_id=run_id,
                phase="main",
                seq=100 + int(message_id[-2:]),
                label=label,
                action_id="discord.announce",
                status=StepStatus.DONE.value,
                idempotency_key=f"{int(message_id):040x}"[-40:],
                result={"posted": {"channel_id": "100", "message_id": message_id, "channel_name": "a"}},
                created_at=T0,
                updated_at=T0,
            )
        )
        return int(result.inserted_primary_key[0])


async def test_a_thread_goes_on_the_latest_or_the_labelled_announcement_and_is_archived_after_the_end(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, {"options": ["going"]})
    store = RunThreads(engine, ManualClock(T0))
    assert await store.announcement(run_id, None) is None
    first = await posted_announcement(engine, run_id, "Call", "900000000000000001")
    await posted_announcement(engine, run_id, "Later", "900000000000000002")
    assert await store.announcement(run_id, None) == Announced("100", "900000000000000002")
    assert await store.announcement(run_id, "Call") == Announced("100", "900000000000000001")

    await store.record(run_id, first, "100", "900000000000000001")
    await store.record(run_id, first, "100", "900000000000000001")  # a retry records nothing new
    (thread,) = await threads.of_run(engine, run_id)
    assert await threads.open_in_flight(engine) == [thread]
    assert await threads.to_archive(engine) == [], "the run has not ended"

    await end(engine, run_id, "failed")
    assert await threads.to_archive(engine) == [thread]
    await threads.archived(engine, thread, ManualClock(T0))
    assert await threads.to_archive(engine) == []
    assert await threads.open_in_flight(engine) == []


async def test_a_threads_members_follow_the_seats_added_on_confirm_and_taken_out_on_leave_or_waitlist(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, {"options": {"tank": 1, "dps": 1}})
    one, two, three = (member(n)[0] for n in (1, 2, 3))
    await signups.join(engine, run_id, *member(1), "tank", (), T0)
    await signups.join(engine, run_id, *member(2), "dps", (), T0)
    await signups.join(engine, run_id, *member(3), "tank", (), T0)  # waiting for member 1's seat
    store, clock = RunThreads(engine, ManualClock(T0)), ManualClock(T0)
    await store.record(run_id, 1, "100", "900000000000000001")
    (thread,) = await threads.of_run(engine, run_id)
    assert await threads.membership_changes(engine, thread) == MembershipChanges([one, two], [])
    for member_id in (one, two):
        await threads.member_added(engine, thread.thread_id, member_id, clock)
        await threads.member_added(engine, thread.thread_id, member_id, clock)  # a repeat: no change
    assert await threads.membership_changes(engine, thread) == MembershipChanges([], [])

    # Member 2 moves to the full tank option: onto its waiting list, so out of the thread.
    await signups.join(engine, run_id, *member(2), "tank", (), T0)
    assert await threads.membership_changes(engine, thread) == MembershipChanges([], [two])
    # Member 1 leaves: out, and member 3 (first waiting for tank) gets the seat, so in.
    await signups.leave(engine, run_id, *member(1), T0)
    assert await threads.membership_changes(engine, thread) == MembershipChanges([three], [one, two])
    for member_id in (one, two):
        await threads.member_removed(engine, thread.thread_id, member_id)
        await threads.member_removed(engine, thread.thread_id, member_id)  # a repeat: no change
    await threads.member_added(engine, thread.thread_id, three, clock)
    assert await threads.membership_changes(engine, thread) == MembershipChanges([], [])

    # Back in (the dps seat member 2 gave up): added again.
    await signups.join(engine, run_id, *member(1), "dps", (), T0)
    assert await threads.membership_changes(engine, thread) == MembershipChanges([one], [])
