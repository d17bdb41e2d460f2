"""Attendance: whether each seated member of a run came (issue 28 item 6).

A GM takes it at a cue (``gm.cue`` with ``attendance: true``) or staff mark it afterwards
(``/event attendance``): the run's seated members are shown in pages of ``PAGE`` (one Discord
select menu each, in click order), and a page submitted marks the members picked as attended
and the others on that page as no-shows. A member who leaves a seat less than ``late_cancel``
before the start is recorded as a late cancel by the leave itself (``runner.signups``). The last
mark of a (run, member) wins, so a GM's slip is corrected by marking again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import signups
from runner.kinds import Actor
from runner.signup_answers import Signup
from runner.sql import attendance as sql
from runner.states import Attendance

# A select menu's most options (Discord's limit).
PAGE = 25


@dataclass(frozen=True)
class AttendancePage:
    run_id: int
    page: int
    pages: int
    members: list[Signup]
    marks: dict[str, Attendance]
    starts_at: dt.datetime


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    counts: dict[Attendance, int]
    # (run id, event title, start, mark), newest first.
    recent: list[tuple[int, str, dt.datetime, Attendance]]


async def page_of(engine: AsyncEngine, run_id: int, page: int) -> AttendancePage | None:
    """Page ``page`` (from 0) of the run's seated members with their marks so far; ``None``: the
    run has no sign-up list. A page past the last is the last."""
    listed = await signups.listing(engine, run_id)
    if listed is None:
        return None
    seated = listed.confirmed
    pages = max(1, -(-len(seated) // PAGE))
    page = min(max(page, 0), pages - 1)
    async with engine.connect() as conn:
        marks = await sql.for_run(conn, run_id)
    return AttendancePage(
        run_id, page, pages, seated[page * PAGE : (page + 1) * PAGE], marks, listed.starts_at
    )


async def mark_page(
    engine: AsyncEngine, run_id: int, page: int, attended: Collection[str], marker: Actor, now: dt.datetime
) -> AttendancePage | None:
    """The members of page ``page`` picked in ``attended`` came, the others on it did not. An id
    not on the page (a stale menu, a forged one) marks nobody."""
    shown = await page_of(engine, run_id, page)
    if shown is None:
        return None
    marks = {
        s.member_id: (s.member_name, Attendance.ATTENDED if s.member_id in attended else Attendance.NO_SHOW)
        for s in shown.members
    }
    async with engine.begin() as conn:
        await sql.mark(conn, run_id, marks, marker.name, now)
    return dataclasses.replace(
        shown, marks=shown.marks | {member: status for member, (_, status) in marks.items()}
    )


async def mark_one(
    engine: AsyncEngine, run_id: int, member: Actor, status: Attendance, marker: Actor, now: dt.datetime
) -> None:
    assert member.id is not None, "a member is marked by id"
    async with engine.begin() as conn:
        await sql.mark(conn, run_id, {member.id: (member.name, status)}, marker.name, now)


async def marks_of(engine: AsyncEngine, run_id: int) -> dict[str, Attendance]:
    async with engine.connect() as conn:
        return await sql.for_run(conn, run_id)


async def record_of(engine: AsyncEngine, member_id: str, recent: int = 10) -> MemberRecord:
    async with engine.connect() as conn:
        counts = (await sql.counts_of(conn, [member_id])).get(member_id, {})
        rows = await sql.record_of(conn, member_id, recent)
    latest = [(int(r["run_id"]), str(r["title"]), r["scheduled_for"], Attendance(r["status"])) for r in rows]
    return MemberRecord(member_id, counts, latest)


async def no_shows(engine: AsyncEngine, member_ids: Collection[str]) -> dict[str, int]:
    """How many runs each member did not come to, over all runs (members with none left out)."""
    async with engine.connect() as conn:
        counts = await sql.counts_of(conn, member_ids)
    return {m: c[Attendance.NO_SHOW] for m, c in counts.items() if c.get(Attendance.NO_SHOW)}
