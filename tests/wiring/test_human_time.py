"""``wiring.human_time``: a time as staff type it, read by dateparser relative to the bot's clock
in the config's zone (issue 28, item 1)."""

from __future__ import annotations

import datetime as dt

import pytest

from wiring.human_time import WhenError, parse_when, shown_local

ZONE = "Europe/Berlin"
# Saturday 5 December 2026, 12:00 in Berlin (11:00 UTC): the bot's clock, naive UTC.
NOW = dt.datetime(2026, 12, 5, 11, 0)


def local(text: str, now: dt.datetime = NOW, zone: str = ZONE) -> str:
    return parse_when(text, now, zone).strftime("%Y-%m-%d %H:%M %z")


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("friday 20:00", "2026-12-11 20:00 +0100"),
        ("tomorrow 8pm", "2026-12-06 20:00 +0100"),
        ("in 2h", "2026-12-05 14:00 +0100"),
        ("2026-12-12 20:00", "2026-12-12 20:00 +0100"),
    ],
)
def test_the_four_ways_the_issue_writes_a_time_are_read_in_the_configs_zone(typed: str, meant: str) -> None:
    assert local(typed) == meant


def test_relative_times_count_from_the_clock_handed_in_not_the_machines() -> None:
    # A simulated clock a year ahead: "in 2h" follows it, whatever the host's date is.
    later = dt.datetime(2027, 7, 1, 8, 0)
    assert local("in 2h", later) == "2027-07-01 12:00 +0200"


def test_a_weekday_or_a_time_of_day_already_past_is_the_next_one() -> None:
    # Saturday 21:00 in Berlin: "20:00" is tomorrow's, "saturday 20:00" next week's.
    evening = dt.datetime(2026, 12, 5, 20, 0)
    assert local("20:00", evening) == "2026-12-06 20:00 +0100"
    assert local("saturday 20:00", evening) == "2026-12-12 20:00 +0100"


def test_the_same_words_in_another_zone_are_another_instant() -> None:
    assert parse_when("2026-12-12 20:00", NOW, "UTC") - parse_when(
        "2026-12-12 20:00", NOW, ZONE
    ) == dt.timedelta(hours=1)


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("blah", "“blah” is not a time I can read"),
        ("2026-12-01 20:00", "“2026-12-01 20:00” is 2026-12-01 20:00 Europe/Berlin, which has passed"),
        ("today 9:00", "which has passed"),
        ("2027-03-28 02:30", "does not exist in Europe/Berlin"),
        ("", "No time was given"),
        ("x" * 101, "is too long to be a time"),
    ],
)
def test_a_time_that_is_unreadable_past_or_skipped_is_refused_naming_what_was_typed(
    typed: str, says: str
) -> None:
    with pytest.raises(WhenError) as refused:
        parse_when(typed, NOW, ZONE)
    assert says in refused.value.message


def test_the_form_shows_a_time_back_as_it_reads_it() -> None:
    at = parse_when("friday 20:00", NOW, ZONE)
    assert shown_local(at, ZONE) == "2026-12-11 20:00"
    assert parse_when(shown_local(at, ZONE), NOW, ZONE) == at
