"""The staff log's lines for sign-ups: a promotion from the waiting list and a late cancel."""

from __future__ import annotations

from bot.cogs.staff_log._lines import log_line
from tests.bot.test_rendering import NAME, RUN, entry

ALICE, BOB = "111111111111111111", "222222222222222222"


def test_a_promotion_names_who_got_the_seat_and_who_left() -> None:
    line = entry(
        "signup.promoted", member_id=ALICE, member_name="alice", option="tank", left_id=BOB, left_name="bob"
    )
    assert (
        log_line(line, RUN)
        == f"⬆️ {NAME}: <@{ALICE}> got a tank seat from the waiting list when <@{BOB}> left"
    )


def test_a_late_cancel_says_how_long_before_the_start() -> None:
    line = entry(
        "signup.late_cancel",
        member_id=ALICE,
        member_name="alice",
        option="dps",
        before_start=5400.0,
        starts_at="2026-01-01T20:00:00",
    )
    assert log_line(line, RUN) == f"⚠️ {NAME}: late cancel, <@{ALICE}> (dps) left 1h30m before the start"
