"""The staff CSV export of a run's sign-ups (issue 28 item 3)."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import signups
from runner.signup_export import HEADER, csv_text, export_run, safe_cell
from runner.states import SignupStatus
from tests.signups.booking import T0, book, member


def _row(member_id: str, name: str, **over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "member_id": member_id,
        "member_name": name,
        "option": "tank",
        "status": "seated",
        "position": 1,
        "joined_at": dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC),
    }
    row.update(over)
    return row


@pytest.mark.parametrize("lead", ["=", "+", "-", "@", "\t", "\r"])
def test_formula_leading_cell_is_quoted_against_csv_injection(lead: str) -> None:
    assert safe_cell(lead + "HYPERLINK(1)") == "'" + lead + "HYPERLINK(1)"


def test_plain_cell_is_left_alone() -> None:
    assert safe_cell("Ayla") == "Ayla"
    assert safe_cell(None) == ""


def test_export_has_the_promised_columns_and_one_line_per_signup() -> None:
    text = csv_text(
        [_row("1", "Ayla"), _row("2", "=cmd|' /C calc'!A0", status="waitlisted", position=2)],
        {"1": "attended"},
    )
    parsed = list(csv.reader(io.StringIO(text)))
    assert tuple(parsed[0]) == HEADER
    assert parsed[1] == ["1", "Ayla", "tank", "seated", "1", "2026-12-05T12:00:00+00:00", "attended"]
    assert parsed[2][1].startswith("'=")
    assert parsed[2][3] == "waitlisted"
    assert parsed[2][6] == ""


def test_names_with_commas_quotes_and_newlines_stay_in_one_cell() -> None:
    name = 'A, "B"\nC'
    parsed = list(csv.reader(io.StringIO(csv_text([_row("1", name)]))))
    assert len(parsed) == 2
    assert parsed[1][1] == name


async def test_export_of_a_booked_run_lists_seated_waiting_and_cancelled_in_click_order(
    engine: AsyncEngine,
) -> None:
    slots = {"options": {"tank": 1}, "capacity": 1, "closes": "1h", "late_cancel": "2h"}
    run_id = await book(engine, slots)
    for n in (1, 2, 3):
        member_id, name = member(n)
        await signups.join(engine, run_id, member_id, name, "tank", (), T0)
    member_id, name = member(3)
    await signups.leave(engine, run_id, member_id, name, T0)
    async with engine.connect() as conn:
        text = await export_run(conn, run_id)
    parsed = list(csv.reader(io.StringIO(text)))
    assert [(line[1], line[3]) for line in parsed[1:]] == [
        ("member1", SignupStatus.CONFIRMED.value),
        ("member2", SignupStatus.WAITLISTED.value),
        ("member3", SignupStatus.CANCELLED.value),
    ]
