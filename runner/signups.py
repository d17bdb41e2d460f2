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
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import history
from runner import signup_rules as rules
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
)
from runner.signup_runs import ensure_pools, run_over, signup_run
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
    refused = rules.refusal(run, option, member_roles, now, by_staff=staff is not None)
    if refused is not None:
        return refused
    assert run is not None
    await ensure_pools(engine, run_id, run.signup)
    return await _join(
        engine, run_id, member_id, member_name, option, member_roles, now, staff=staff, moving=moving
    )


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
    answer: ImportAnswer | JoinAnswer | NotSignedUp | None = rules.refusal(run, option, member_roles, now)
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
        return await rules.join_locked(
            conn,
            run_id,
            member_id,
            member_name,
            option,
            member_roles,
            now,
            imported=imported,
            staff=staff,
            moving=moving,
        )


@dataclass(frozen=True)
class Click:
    """One member's press of an option's button, for ``join_many``."""

    member_id: str
    member_name: str
    option: str
    member_roles: tuple[str, ...]
    now: dt.datetime


@retry_on_conflict
async def join_many(engine: AsyncEngine, run_id: int, clicks: Sequence[Click]) -> list[JoinAnswer]:
    """Several members' presses on one run, in the order given, in one transaction: one lock of
    the run's ``*`` row and one commit for all, where ``join`` takes one each. The rules are the
    same per click (each its own click number, seat or place in line); a burst of hundreds is
    then answered in the time the database takes for their statements, not their commits."""
    async with engine.connect() as conn:
        run = await signup_run(conn, run_id)
    answers: dict[int, JoinAnswer] = {}
    for n, click in enumerate(clicks):
        refused = rules.refusal(run, click.option, click.member_roles, click.now)
        if refused is not None:
            answers[n] = refused
    if len(answers) < len(clicks):
        assert run is not None
        await ensure_pools(engine, run_id, run.signup)
        async with engine.begin() as conn:
            first = await sql.next_clicks(conn, run_id, len(clicks) - len(answers))
            assert first is not None, "the pools were created before"
            # Read again under the lock: a cancel, a close or the start may have come since.
            members = [click.member_id for n, click in enumerate(clicks) if n not in answers]
            known = await sql.signups_of(conn, run_id, members)
            batch = rules.Batch(await signup_run(conn, run_id), first, {m: known.get(m) for m in members})
            for n, click in enumerate(clicks):
                if n in answers:
                    continue
                answer = await rules.join_locked(
                    conn,
                    run_id,
                    click.member_id,
                    click.member_name,
                    click.option,
                    click.member_roles,
                    click.now,
                    batch=batch,
                )
                assert not isinstance(answer, AlreadyKnown | NotSignedUp), (
                    "a press is neither an import nor a move"
                )
                answers[n] = answer
            await batch.flush(conn)
    return [answers[n] for n in range(len(clicks))]


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
        promoted = await rules.promote(conn, run_id, now, left=(member_id, member_name))
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
