"""Sign-ups for a run: join, leave, the list. No Discord here: a member is an id and a name, and
their roles are the config's role aliases they hold (the front end works those out).

Each operation is one transaction that begins by locking the run's ``*`` pool row
(``runner.sql.signups``), so the joins and leaves of one run are serialised by the database, in
the order it granted that lock: the click order. A seat is an UPDATE guarded by
``taken < capacity`` that the server answers; a leave frees the seat and promotes the first
waitlisted member whose option then has room, and writes their notice row, in that same
transaction: a process killed before the commit leaves nothing behind, one killed after it
leaves exactly one promotion and one notice for whoever delivers notices
(``claim_notices`` / ``settle_notice``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import history
from runner.db import retry_on_conflict
from runner.signup_answers import (
    AlreadyIn,
    AlreadyKnown,
    Confirmed,
    ImportAnswer,
    JoinAnswer,
    LeaveAnswer,
    Left,
    Moved,
    NotSignedUp,
    OptionList,
    Promotion,
    Refused,
    RefusedWhy,
    Signup,
    SignupList,
    Waitlisted,
    closed,
)
from runner.signup_runs import SignupRun, ensure_pools, run_over, signup_run
from runner.sql import attendance as attendance_sql
from runner.sql import signups as sql
from runner.states import (
    Attendance,
    SignupImport,
    SignupStatus,
    StaffSignupChange,
)

# The answers are re-exported: callers know one module for sign-ups.
__all__ = [
    "AlreadyIn",
    "AlreadyKnown",
    "Confirmed",
    "ImportAnswer",
    "JoinAnswer",
    "LeaveAnswer",
    "Left",
    "Moved",
    "NotSignedUp",
    "OptionList",
    "Promotion",
    "Refused",
    "RefusedWhy",
    "Signup",
    "SignupList",
    "Waitlisted",
]

OVERALL = sql.OVERALL


async def join(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    member_roles: Collection[str],
    now: dt.datetime,
) -> JoinAnswer:
    """Sign ``member_id`` up in ``option`` (``member_roles``: the role aliases they hold)."""
    answer = await _enter(engine, run_id, member_id, member_name, option, member_roles, now)
    assert not isinstance(answer, AlreadyKnown | NotSignedUp), "only an import or a move is told so"
    return answer


async def by_staff(
    engine: AsyncEngine,
    run_id: int,
    member: history.Actor,
    option: str,
    staff: history.Actor,
    now: dt.datetime,
    *,
    moving: bool = False,
) -> JoinAnswer | NotSignedUp:
    """Staff sign ``member`` up in ``option`` (``/event signups add|move``): past the closing
    time and whatever roles they hold, but within capacity and the waiting list like a click,
    with a run-log line naming who. ``moving``: only a member signed up now (else
    ``NotSignedUp``)."""
    assert member.id is not None, "a member signed up by staff has an id"
    answer = await _enter(engine, run_id, member.id, member.name, option, (), now, staff=staff, moving=moving)
    assert not isinstance(answer, AlreadyKnown), "only an import is told so"
    return answer


async def _enter(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    member_roles: Collection[str],
    now: dt.datetime,
    *,
    staff: history.Actor | None = None,
    moving: bool = False,
) -> JoinAnswer | AlreadyKnown | NotSignedUp:
    async with engine.connect() as conn:
        run = await signup_run(conn, run_id)
    refused = _refusal(run, option, member_roles, now, by_staff=staff is not None)
    if refused is not None:
        return refused
    assert run is not None
    await ensure_pools(engine, run_id, run.signup)
    return await _join(
        engine, run_id, member_id, member_name, option, member_roles, now, staff=staff, moving=moving
    )


def _refusal(
    run: SignupRun | None,
    option: str,
    member_roles: Collection[str],
    now: dt.datetime,
    *,
    by_staff: bool = False,
) -> Refused | None:
    if run is None:
        return Refused(RefusedWhy.NO_SIGNUP)
    if run_over(run.status):
        return Refused(RefusedWhy.RUN_OVER)
    if not by_staff and closed(run.status, run.closes_at, now, run.override):
        return Refused(RefusedWhy.CLOSED, closes_at=run.closes_at)
    if option not in run.signup.options:
        return Refused(RefusedWhy.NO_SUCH_OPTION, needed=tuple(run.signup.options))
    allowed = run.signup.roles
    if allowed and not by_staff and not set(allowed) & set(member_roles):
        return Refused(RefusedWhy.NOT_ALLOWED_ROLE, needed=tuple(allowed))
    return None


async def import_interested(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    member_roles: Collection[str],
    now: dt.datetime,
) -> ImportAnswer:
    """Sign up a member who marked the run's Discord scheduled event Interested, in the
    sign-up's ``interested`` option, as their click would (capacity, waiting list and roles
    hold): once, and only if they never signed up. The import is one way: a member who left is
    not signed up again, and one refused for their roles is recorded so they are not asked
    about again (``event_signup_imports``). ``member_roles``: the role aliases they hold."""
    async with engine.connect() as conn:
        run = await signup_run(conn, run_id)
    option = run.signup.interested if run is not None else None
    if run is None or option is None:
        return Refused(RefusedWhy.NO_SIGNUP)
    answer: ImportAnswer | JoinAnswer | NotSignedUp | None = _refusal(run, option, member_roles, now)
    if answer is None:
        await ensure_pools(engine, run_id, run.signup)
        answer = await _join(engine, run_id, member_id, member_name, option, member_roles, now, imported=True)
    if isinstance(answer, Refused) and answer.why == RefusedWhy.NOT_ALLOWED_ROLE:
        async with engine.begin() as conn:
            await sql.record_import(conn, run_id, member_id, SignupImport.NOT_ALLOWED_ROLE, now)
    assert not isinstance(answer, AlreadyIn | Moved | NotSignedUp), "an import touches no sign-up that exists"
    assert answer is not None
    return answer


@retry_on_conflict
async def _join(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    option: str,
    member_roles: Collection[str],
    now: dt.datetime,
    *,
    imported: bool = False,
    staff: history.Actor | None = None,
    moving: bool = False,
) -> JoinAnswer | AlreadyKnown | NotSignedUp:
    async with engine.begin() as conn:
        click = await sql.next_click(conn, run_id)
        assert click is not None, "the pools were created before"
        # Read again under the lock: a cancel, a close or the start may have come since.
        run = await signup_run(conn, run_id)
        refused = _refusal(run, option, member_roles, now, by_staff=staff is not None)
        if refused is not None:
            return refused
        assert run is not None
        existing = await sql.signup_of(conn, run_id, member_id)
        if moving and (existing is None or existing["status"] == SignupStatus.CANCELLED):
            return NotSignedUp()
        if imported and (existing is not None or await sql.was_imported(conn, run_id, member_id)):
            # Under the lock: a click that came since the poll read the list is never moved.
            return AlreadyKnown()
        status = SignupStatus(existing["status"]) if existing else None
        if existing is not None and status != SignupStatus.CANCELLED and existing["option"] == option:
            place = (
                await sql.waitlist_place(conn, run_id, option, int(existing["position"]))
                if status == SignupStatus.WAITLISTED
                else None
            )
            assert status is not None
            return AlreadyIn(option, status, place)
        promoted: Promotion | None = None
        if existing is not None and status == SignupStatus.CONFIRMED:
            # A move keeps the overall seat when the new option has one; else it is given up.
            full = None if await sql.take_seat(conn, run_id, option) else option
            await sql.free_seat(conn, run_id, str(existing["option"]))
            if full is not None:
                await sql.free_seat(conn, run_id, OVERALL)
        else:
            full = await _take_seats(conn, run_id, option)
        now_status = SignupStatus.CONFIRMED if full is None else SignupStatus.WAITLISTED
        await sql.write_signup(
            conn,
            run_id=run_id,
            member_id=member_id,
            member_name=member_name,
            option=option,
            status=now_status,
            position=click,
            now=now,
            existed=existing is not None,
        )
        answer: Confirmed | Waitlisted = Confirmed(option, click)
        if full is not None:
            place = await sql.waitlist_place(conn, run_id, option, click)
            answer = Waitlisted(option, place, click, event_full=full == OVERALL)
        if imported:
            await sql.record_import(conn, run_id, member_id, SignupImport.JOINED, now)
        was_in = existing is not None and status != SignupStatus.CANCELLED
        if staff is not None:
            change = history.SignupChangedByStaff(
                member_id,
                member_name,
                StaffSignupChange.MOVED if was_in else StaffSignupChange.ADDED,
                option,
                now_status,
                from_option=str(existing["option"]) if existing is not None and was_in else None,
            )
            await history.record(conn, run_id, change, now, actor=staff)
        if existing is not None and status == SignupStatus.CONFIRMED:
            promoted = await _promote(conn, run_id, now, left=(member_id, member_name))
            return Moved(str(existing["option"]), answer, promoted)
        if existing is not None and status == SignupStatus.WAITLISTED:
            return Moved(str(existing["option"]), answer)
        return answer


async def _take_seats(conn: AsyncConnection, run_id: int, option: str) -> str | None:
    """A seat of the option and one of the run, or neither: None, or the pool that was full
    (``OVERALL``: the option had room, the event had none)."""
    if not await sql.take_seat(conn, run_id, option):
        return option
    if await sql.take_seat(conn, run_id, OVERALL):
        return None
    await sql.free_seat(conn, run_id, option)
    return OVERALL


async def _promote(
    conn: AsyncConnection, run_id: int, now: dt.datetime, *, left: tuple[str, str]
) -> Promotion | None:
    """The first waitlisted member whose option has a seat, into it, with their notice row and
    the run-log line, all in the caller's transaction (which holds the run's lock)."""
    overall = next(p for p in await sql.pools(conn, run_id) if p["pool"] == OVERALL)
    if overall["capacity"] is not None and overall["taken"] >= overall["capacity"]:
        return None
    first = await sql.first_waitlisted_with_room(conn, run_id)
    if first is None:
        return None
    member_id, option, position = str(first["member_id"]), str(first["option"]), int(first["position"])
    full = await _take_seats(conn, run_id, option)
    assert full is None, "the run's lock is held: the seat just seen free is still free"
    moved = await sql.set_status(
        conn, run_id, member_id, from_=SignupStatus.WAITLISTED, to=SignupStatus.CONFIRMED, now=now
    )
    assert moved, "the run's lock is held: the waitlisted row just read is still waitlisted"
    await sql.add_notice(conn, run_id, member_id, option, position, now)
    name = str(first["member_name"])
    event = history.SignupPromoted(member_id, name, option, left_id=left[0], left_name=left[1])
    await history.record(conn, run_id, event, now)
    return Promotion(member_id, name, option)


@retry_on_conflict
async def leave(
    engine: AsyncEngine,
    run_id: int,
    member_id: str,
    member_name: str,
    now: dt.datetime,
    *,
    staff: history.Actor | None = None,
) -> LeaveAnswer:
    """Take ``member_id`` off the run's list; a seat they held goes to the first member waiting
    for it, once. ``staff``: staff removed them (a run-log line names who; not a late cancel,
    which is the member's own record)."""
    async with engine.begin() as conn:
        if not await sql.lock_run(conn, run_id):
            return NotSignedUp()
        run = await signup_run(conn, run_id)
        if run is None:
            return Refused(RefusedWhy.NO_SIGNUP)
        if run_over(run.status):
            return Refused(RefusedWhy.RUN_OVER)
        existing = await sql.signup_of(conn, run_id, member_id)
        if existing is None or existing["status"] == SignupStatus.CANCELLED:
            return NotSignedUp()
        was = SignupStatus(existing["status"])
        option = str(existing["option"])
        moved = await sql.set_status(conn, run_id, member_id, from_=was, to=SignupStatus.CANCELLED, now=now)
        assert moved, "the run's lock is held: the row just read has not changed"
        if staff is not None:
            removed = history.SignupChangedByStaff(member_id, member_name, StaffSignupChange.REMOVED, option)
            await history.record(conn, run_id, removed, now, actor=staff)
        if was != SignupStatus.CONFIRMED:
            return Left(option, was)
        await sql.free_seat(conn, run_id, option)
        await sql.free_seat(conn, run_id, OVERALL)
        promoted = await _promote(conn, run_id, now, left=(member_id, member_name))
        before_start = (run.starts_at - now).total_seconds()
        late = staff is None and before_start < run.signup.late_cancel
        if late:
            came = {member_id: (member_name, Attendance.LATE_CANCEL)}
            await attendance_sql.mark(conn, run_id, came, member_name, now)
            event = history.SignupLateCancel(member_id, member_name, option, before_start, run.starts_at)
            await history.record(conn, run_id, event, now, actor=history.Actor(member_id, member_name))
        return Left(option, was, promoted, late)


async def listing(engine: AsyncEngine, run_id: int) -> SignupList | None:
    """The run's list per option, in click order (``None``: the run has no sign-up)."""
    async with engine.connect() as conn:
        run = await signup_run(conn, run_id)
        if run is None:
            return None
        rows = await sql.for_run(conn, run_id)
    by_option = {name: OptionList(name, cap) for name, cap in run.signup.options.items()}
    for row in rows:
        signup = Signup(
            str(row["member_id"]),
            str(row["member_name"]),
            str(row["option"]),
            SignupStatus(row["status"]),
            int(row["position"]),
            row["joined_at"],
        )
        # An option a newer version dropped is still listed: those people signed up.
        option = by_option.setdefault(signup.option, OptionList(signup.option, None))
        (option.confirmed if signup.status == SignupStatus.CONFIRMED else option.waitlisted).append(signup)
    listed = list(by_option.values())
    return SignupList(run_id, run.signup, listed, run.starts_at, run.closes_at, run.status, run.override)


@dataclass(frozen=True)
class RunSignups:
    """``actions.signup.SignupStore`` on the database: a run's sign-up list."""

    engine: AsyncEngine

    async def listing(self, run_id: int) -> SignupList | None:
        return await listing(self.engine, run_id)


async def attendees(engine: AsyncEngine, run_id: int) -> list[str]:
    """The confirmed members' ids, in click order: ``{attendees}`` and a cue's ``ping: attendees``."""
    found = await listing(engine, run_id)
    return [s.member_id for s in found.confirmed] if found else []
