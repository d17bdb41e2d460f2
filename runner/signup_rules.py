"""The sign-up rules inside the run's lock: whether a change is refused, a join (a seat, a place
in line, a move) and a promotion, each given the transaction that holds the run's ``*`` pool row
(``runner.signups`` opens it: one per click, one per burst, one per leave). A member is an id and
a name; nothing here commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner import history
from runner.signup_answers import (
    AlreadyIn,
    AlreadyKnown,
    Confirmed,
    JoinAnswer,
    Moved,
    NotSignedUp,
    Promotion,
    Refused,
    RefusedWhy,
    Waitlisted,
    closed,
)
from runner.signup_runs import SignupRun, run_over, signup_run
from runner.sql import signups as sql
from runner.states import SignupImport, SignupStatus, StaffSignupChange

OVERALL = sql.OVERALL


@dataclass
class Batch:
    """What one transaction holding the run's lock already knows, so that a burst of presses
    (``runner.signups.join_many``) costs a few statements each: the run as read under the lock,
    its click numbers taken in one statement, the pools found full, and each option's waiting
    list length. Only this transaction can change the run's seats while it holds the lock, so a
    pool found full stays full, and the next in line is one further back, until a member moves
    (their seat or place is given up): then all is asked of the database again (``forget``)."""

    run: SignupRun | None
    next_click: int
    # The presses' members' sign-ups, read in one statement; each is used once (a member who
    # presses twice in one burst is read again, after the first press is written).
    known: dict[str, sa.RowMapping | None] = field(default_factory=dict)
    full: set[str] = field(default_factory=set)
    waiting: dict[str, int] = field(default_factory=dict)
    # New sign-ups decided but not yet written: one INSERT for all before anything is read.
    unwritten: list[dict[str, Any]] = field(default_factory=list)

    async def existing(self, conn: AsyncConnection, run_id: int, member_id: str) -> sa.RowMapping | None:
        if member_id in self.known:
            return self.known.pop(member_id)
        await self.flush(conn)
        return await sql.signup_of(conn, run_id, member_id)

    async def flush(self, conn: AsyncConnection) -> None:
        await sql.insert_signups(conn, self.unwritten)
        self.unwritten.clear()

    def take_click(self) -> int:
        self.next_click += 1
        return self.next_click - 1

    def forget(self) -> None:
        self.full.clear()
        self.waiting.clear()

    async def place(self, conn: AsyncConnection, run_id: int, option: str, click: int) -> int:
        """Where the newest waiting member of ``option`` stands: last, behind those before."""
        if option in self.waiting:
            self.waiting[option] += 1
        else:
            await self.flush(conn)
            self.waiting[option] = await sql.waitlist_place(conn, run_id, option, click)
        return self.waiting[option]


def refusal(
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


async def join_locked(
    conn: AsyncConnection,
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
    batch: Batch | None = None,
) -> JoinAnswer | AlreadyKnown | NotSignedUp:
    if batch is None:
        click = await sql.next_click(conn, run_id)
        assert click is not None, "the pools were created before"
        # Read again under the lock: a cancel, a close or the start may have come since.
        run = await signup_run(conn, run_id)
    else:
        click, run = batch.take_click(), batch.run
    refused = refusal(run, option, member_roles, now, by_staff=staff is not None)
    if refused is not None:
        return refused
    assert run is not None
    existing = await (
        batch.existing(conn, run_id, member_id) if batch else sql.signup_of(conn, run_id, member_id)
    )
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
    if batch is not None and existing is not None and status != SignupStatus.CANCELLED:
        batch.forget()  # a move gives up a seat or a place in line: ask the database again
        await batch.flush(conn)
    if existing is not None and status == SignupStatus.CONFIRMED:
        # A move keeps the overall seat when the new option has one; else it is given up.
        full = None if await sql.take_seat(conn, run_id, option) else option
        await sql.free_seat(conn, run_id, str(existing["option"]))
        if full is not None:
            await sql.free_seat(conn, run_id, OVERALL)
    else:
        full = await take_seats(conn, run_id, option, batch)
    now_status = SignupStatus.CONFIRMED if full is None else SignupStatus.WAITLISTED
    if batch is not None and existing is None:
        row = sql.new_signup(
            run_id=run_id,
            member_id=member_id,
            member_name=member_name,
            option=option,
            status=now_status,
            position=click,
            now=now,
        )
        batch.unwritten.append(row)
    else:
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
        place = await (batch.place if batch else sql.waitlist_place)(conn, run_id, option, click)
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
        promoted = await promote(conn, run_id, now, left=(member_id, member_name))
        return Moved(str(existing["option"]), answer, promoted)
    if existing is not None and status == SignupStatus.WAITLISTED:
        return Moved(str(existing["option"]), answer)
    return answer


async def take_seats(
    conn: AsyncConnection, run_id: int, option: str, batch: Batch | None = None
) -> str | None:
    """A seat of the option and one of the run, or neither: None, or the pool that was full
    (``OVERALL``: the option had room, the event had none)."""
    if batch is not None and option in batch.full:
        return option
    if not await sql.take_seat(conn, run_id, option):
        if batch is not None:
            batch.full.add(option)
        return option
    if await sql.take_seat(conn, run_id, OVERALL):
        return None
    await sql.free_seat(conn, run_id, option)
    return OVERALL


async def promote(
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
    full = await take_seats(conn, run_id, option)
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
