"""``rehearse --signups`` (issue 28 item 8): the run is booked for its start, the sign-up message
is shown when it would be posted, simulated members click (the database deciding seats and the
waiting lists), a leave promotes the first member waiting with their direct message, attendance
is taken after the run; and a scheduled event is rehearsed at its next real occurrence, said in
its time zone and UTC."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.conftest import Cli, announce, definition, write_yaml
from tests.support.definitions import cron, cue

SIGNUP = {
    "channel": "announcements",
    "options": {"tank": 2, "dps": 4},
    "capacity": 5,
    "closes": "1h",
    "opens": "2d",
}


def test_simulated_members_fill_the_seats_the_waiting_list_and_a_promotion_is_shown(
    cli: Cli, tmp_path: Path
) -> None:
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(announce("announcements", "Go!"), cue("Count heads", attendance=True), signup=SIGNUP),
    )
    result = cli("rehearse", event, "--cues", "confirm", "--signups", "7")
    assert result.code == 0, result.out
    out = result.out
    assert "run 1: sign-ups open 2d before the start:" in out
    assert "[-48:00:00] run 1: sign-up message in #announcements, no ping" in out
    # 7 members in turn: tank, dps, tank, dps, ...; tank has 2 seats, the event 5.
    assert "@member01 clicked tank: a seat" in out
    assert "@member05 clicked tank: tank is full, #1 on its waiting list" in out
    assert "@member06 clicked dps: a seat" in out
    assert "@member07 clicked tank: tank is full, #2 on its waiting list" in out
    # The first seated leaves; the first waiting for tank gets the seat and a direct message.
    assert "@member01 left tank: @member05 gets the seat" in out
    assert "direct message to @member05: 🎉 A seat freed up" in out
    now = out[out.index("the sign-up message now") :]
    assert "┃ tank (2/2): @member03, @member05" in now and "┃   waiting (1): @member07" in now
    assert "[ Confirm ]  [ Skip ]  [ Take attendance ]" in out
    assert re.search(r"run 1: attendance taken: 4 came, no-show: @member\d\d", out), out
    assert "run 1: completed (health ok)" in out


def test_a_scheduled_event_is_rehearsed_at_its_next_real_occurrence_in_its_zone_and_utc(
    cli: Cli, tmp_path: Path
) -> None:
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(announce("announcements", "Go!"), schedule=cron("0 19 * * SAT", "Europe/Berlin")),
    )
    result = cli("rehearse", event, "--cues", "confirm")
    assert result.code == 0, result.out
    [line] = [line for line in result.lines if line.startswith("It starts at its next occurrence:")]
    # 19:00 in Berlin is 18:00 UTC in winter, 17:00 in summer: both named.
    assert re.fullmatch(
        r"It starts at its next occurrence: Sat \d+ \w+ \d{4} 19:00 CES?T \(1[78]:00 UTC\)\.", line
    ), line


def test_signups_for_an_option_the_event_lacks_are_refused_naming_it(cli: Cli, tmp_path: Path) -> None:
    event = write_yaml(tmp_path / "event.yaml", definition(announce("announcements", "Go!"), signup=SIGNUP))
    result = cli("rehearse", event, "--signups", "tank,mage")
    assert result.code == 1
    assert "--signups: mage is not an option of test-event (its options: tank, dps)" in result.out
    no_signup = write_yaml(tmp_path / "plain.yaml", definition(announce("announcements", "Go!")))
    result = cli("rehearse", no_signup, "--signups", "3")
    assert result.code == 1 and "--signups: test-event has no signup: to rehearse" in result.out
