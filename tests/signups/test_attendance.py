"""Attendance on both backends (issue 28 item 6): a page marks the members picked as attended
and the others on it as no-shows, the last mark wins, a stale or forged id marks nobody, a late
cancel is recorded by the leave itself, and a member's record and no-show counts add up."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import attendance, signups
from runner.history import Actor
from runner.states import Attendance
from tests.signups.booking import STARTS, T0, book, member

SLOTS = {"options": {"dps": None}, "closes": "1h", "late_cancel": "2h"}
GM = Actor("900000000000000002", "gm")
AFTER = STARTS + dt.timedelta(hours=2)


async def seat(engine: AsyncEngine, run_id: int, *ns: int) -> None:
    for n in ns:
        await signups.join(engine, run_id, *member(n), "dps", (), T0)


async def test_a_page_marks_the_picked_as_attended_and_the_rest_as_no_shows(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    await seat(engine, run_id, 1, 2, 3)
    page = await attendance.mark_page(engine, run_id, 0, {member(1)[0], member(3)[0]}, GM, AFTER)
    assert page is not None
    assert page.marks == {
        member(1)[0]: Attendance.ATTENDED,
        member(2)[0]: Attendance.NO_SHOW,
        member(3)[0]: Attendance.ATTENDED,
    }
    # Marking again replaces: the GM's slip about member 3 is corrected.
    page = await attendance.mark_page(engine, run_id, 0, {member(1)[0]}, GM, AFTER)
    assert page is not None and page.marks[member(3)[0]] == Attendance.NO_SHOW


async def test_an_id_not_on_the_page_marks_nobody(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    await seat(engine, run_id, 1)
    page = await attendance.mark_page(engine, run_id, 0, {member(1)[0], member(9)[0]}, GM, AFTER)
    assert page is not None and set(page.marks) == {member(1)[0]}


async def test_pages_hold_25_seated_members_each_in_click_order(engine: AsyncEngine) -> None:
    run_id = await book(engine, SLOTS)
    await seat(engine, run_id, *range(1, 31))
    first = await attendance.page_of(engine, run_id, 0)
    second = await attendance.page_of(engine, run_id, 1)
    assert first is not None and second is not None
    assert (first.pages, len(first.members), len(second.members)) == (2, 25, 5)
    assert second.members[0].member_name == "member26"
    await attendance.mark_page(engine, run_id, 1, set(), GM, AFTER)
    marks = await attendance.marks_of(engine, run_id)
    assert len(marks) == 5 and set(marks.values()) == {Attendance.NO_SHOW}, "page 2 marks page 2 only"


async def test_a_late_cancel_is_recorded_and_the_record_adds_up_over_runs(engine: AsyncEngine) -> None:
    first = await book(engine, SLOTS)
    second = await book(engine, SLOTS, starts=STARTS + dt.timedelta(days=7))
    await seat(engine, first, 1, 2)
    await seat(engine, second, 1)
    await signups.leave(engine, first, *member(2), STARTS - dt.timedelta(minutes=30))
    await attendance.mark_page(engine, first, 0, set(), GM, AFTER)
    await attendance.mark_page(engine, second, 0, set(), GM, AFTER + dt.timedelta(days=7))
    record = await attendance.record_of(engine, member(1)[0])
    assert record.counts == {Attendance.NO_SHOW: 2}
    assert [(run, mark) for run, _, _, mark in record.recent] == [
        (second, Attendance.NO_SHOW),
        (first, Attendance.NO_SHOW),
    ]
    late = await attendance.record_of(engine, member(2)[0])
    assert late.counts == {Attendance.LATE_CANCEL: 1}
    assert await attendance.no_shows(engine, [member(1)[0], member(2)[0]]) == {member(1)[0]: 2}
