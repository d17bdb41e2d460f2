"""``runner.signups.import_interested`` on both backends: a member from the Discord event's
Interested list is signed up to ``signup.interested`` as a click would be, once; a member who
signed up by click (even one who left since) is never touched, and one refused for their roles
is recorded and not asked about again."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import signup_reads, signups
from runner.signups import AlreadyKnown, Confirmed, Refused, RefusedWhy, Waitlisted
from runner.states import SignupImport
from tests.signups.booking import T0, book, member

INTERESTED = {"options": {"going": 1, "maybe": None}, "interested": "going", "closes": "1h"}


async def import_member(engine: AsyncEngine, run_id: int, n: int, roles: tuple[str, ...] = ()) -> object:
    member_id, name = member(n)
    return await signups.import_interested(engine, run_id, member_id, name, roles, T0)


async def test_the_interested_take_seats_then_wait_and_each_is_imported_once(engine: AsyncEngine) -> None:
    run_id = await book(engine, INTERESTED)
    assert await import_member(engine, run_id, 1) == Confirmed("going", 1)
    assert await import_member(engine, run_id, 2) == Waitlisted("going", 1, 2)
    assert await import_member(engine, run_id, 1) == AlreadyKnown()
    assert await signup_reads.imported_members(engine, run_id) == {
        member(1)[0]: SignupImport.JOINED,
        member(2)[0]: SignupImport.JOINED,
    }
    assert await signup_reads.known_members(engine, run_id) == {member(1)[0], member(2)[0]}


async def test_a_member_who_clicked_since_the_poll_read_the_list_is_not_moved(engine: AsyncEngine) -> None:
    # The poll read the list before the member clicked: the import must not move them.
    run_id = await book(engine, INTERESTED)
    member_id, name = member(1)
    assert await signups.join(engine, run_id, member_id, name, "maybe", (), T0) == Confirmed("maybe", 1)
    assert await import_member(engine, run_id, 1) == AlreadyKnown()
    await signups.leave(engine, run_id, member_id, name, T0)
    assert await import_member(engine, run_id, 1) == AlreadyKnown(), "who left stays out"
    listed = await signups.listing(engine, run_id)
    assert listed is not None and listed.confirmed == [] and listed.waitlisted == []
    assert await signup_reads.imported_members(engine, run_id) == {}


async def test_a_member_without_the_allowed_role_is_recorded_and_not_asked_again(engine: AsyncEngine) -> None:
    run_id = await book(engine, {**INTERESTED, "roles": ["raiders"]})
    assert await import_member(engine, run_id, 1) == Refused(RefusedWhy.NOT_ALLOWED_ROLE, ("raiders",))
    assert await import_member(engine, run_id, 2, ("raiders",)) == Confirmed("going", 1)
    assert await signup_reads.imported_members(engine, run_id) == {
        member(1)[0]: SignupImport.NOT_ALLOWED_ROLE,
        member(2)[0]: SignupImport.JOINED,
    }
    assert member(1)[0] in await signup_reads.known_members(engine, run_id)


async def test_nothing_is_imported_without_interested_or_after_closing(engine: AsyncEngine) -> None:
    plain = await book(engine, {"options": ["going"]}, key="plain")
    assert await import_member(engine, plain, 1) == Refused(RefusedWhy.NO_SIGNUP)
    late = await book(engine, INTERESTED, starts=T0)
    answer = await import_member(engine, late, 1)
    assert isinstance(answer, Refused) and answer.why == RefusedWhy.CLOSED
    assert await signup_reads.imported_members(engine, late) == {}
