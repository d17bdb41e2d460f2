"""``upcoming``, and what ``validate`` and ``runs`` say of the schedule (issue 11): the runs
already created with their ids, the occurrences to come beyond them, every time in the event's
zone beside UTC.

The commands read the wall clock, so the schedules here are chosen to read the same whatever
the day: a daily noon in Asia/Tokyo (no DST; always "12:00 JST (03:00 UTC)"), a once in 2099.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from runner import catalog
from runner.clock import SystemClock
from runner.controls import Controls
from runner.engine import Runner, RunnerSettings
from runner.history import Actor
from runner.registry import ActionRegistry
from tests.cli.conftest import Cli, on_database, sqlite_url, write_yaml
from tests.support.definitions import event, phase, wait

NOON_TOKYO = "12:00 JST (03:00 UTC)"
OCCURRENCE = re.compile(r"^\s*(run \d+|planned)\s+(\w{3} \d{1,2} \w{3} \d{4}) 12:00 JST \(03:00 UTC\)$")


def daily(**fields: object) -> dict[str, object]:
    spec = event(
        "daily-quiz",
        phase("main", wait("1m")),
        title="Daily quiz",
        schedule={"cron": "0 12 * * *", "timezone": "Asia/Tokyo"},
        scopes=["eu", "us"],
    )
    spec.update(fields)
    return spec


@pytest.fixture
def database(cli: Cli, tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "eventbot.sqlite3")
    assert cli("migrate", "--database", url).code == 0
    return url


def publish(cli: Cli, tmp_path: Path, database: str, spec: dict[str, object], name: str) -> None:
    result = cli("publish", write_yaml(tmp_path / f"{name}.yaml", spec), "--database", database)
    assert result.code == 0, result.out + result.err


def materialise(url: str) -> None:
    """One tick of the real runner on the wall clock: it creates the occurrences of the next day
    (a daily cron: exactly one per scope), as the bot's runner would."""

    async def tick(engine: object) -> None:
        runner = Runner(engine, ActionRegistry(), clock=SystemClock(), settings=RunnerSettings())  # type: ignore[arg-type]
        await runner.tick()

    on_database(url, tick)


def scheduled_run_ids(url: str) -> list[int]:
    async def read(engine: object) -> list[int]:
        from runner import views

        return sorted(r.id for r in await views.list_runs(engine, in_flight_only=True))  # type: ignore[arg-type]

    return on_database(url, read)


def occurrence_days(lines: list[str]) -> list[tuple[str, dt.date]]:
    found = []
    for line in lines:
        match = OCCURRENCE.match(line)
        if match:
            found.append((match[1], dt.datetime.strptime(match[2], "%a %d %b %Y").date()))
    return found


def test_upcoming_lists_each_scopes_next_occurrences_in_the_events_zone_and_utc(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    """Before the runner has created anything, every occurrence is "planned": three per scope,
    on consecutive days, each in the event's zone with UTC beside it. The reminders are named
    by lead time, longest first."""
    reminders = [
        {"before": "15m", "channel": "announcements", "content": "Quiz {start_relative}"},
        {"before": "1h", "channel": "announcements", "content": "Quiz at {start}"},
    ]
    publish(cli, tmp_path, database, daily(reminders=reminders), "daily")
    result = cli("upcoming", "--database", database)
    assert result.code == 0, result.err
    assert result.lines[0] == "daily-quiz ('Daily quiz') v1: cron '0 12 * * *' in Asia/Tokyo"
    assert result.lines[1] == "  reminders: 1h, 15m before each occurrence"
    assert result.lines[2] == "  scope eu:" and result.lines[6] == "  scope us:"
    found = occurrence_days(result.lines)
    assert [kind for kind, _ in found] == ["planned"] * 6
    days = [day for _, day in found[:3]]
    assert [later - earlier for earlier, later in itertools.pairwise(days)] == [dt.timedelta(days=1)] * 2
    assert [day for _, day in found[3:]] == days, "every scope has the same occurrences"
    assert "run " not in result.out


def test_upcoming_names_the_runs_already_created_so_staff_can_cancel_one(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    """Once the runner has created the next day's occurrences, they are listed by run id
    (status scheduled) and the rest as planned; a cancelled one is gone from the list, and its
    scope's next three follow on after it."""
    publish(cli, tmp_path, database, daily(), "daily")
    materialise(database)
    eu_run, us_run = scheduled_run_ids(database)
    result = cli("upcoming", "daily-quiz", "--database", database)
    assert result.code == 0, result.err
    found = occurrence_days(result.lines)
    assert [kind for kind, _ in found] == [
        f"run {eu_run}",
        "planned",
        "planned",
        f"run {us_run}",
        "planned",
        "planned",
    ]
    assert "cancel it before it starts with /event cancel" in result.out
    first_day = found[0][1]

    async def cancel(engine: object) -> None:
        controls = Controls(engine, clock=SystemClock(), versions=catalog.VersionCache())  # type: ignore[arg-type]
        assert (await controls.cancel(eu_run, reason="no quizmaster", actor=Actor(None, "test"))).ok

    on_database(database, cancel)
    found = occurrence_days(cli("upcoming", "--database", database).lines)
    eu, us = found[:3], found[3:]
    assert [kind for kind, _ in eu] == ["planned"] * 3
    assert eu[0][1] == first_day + dt.timedelta(days=1), "the cancelled day is not to come any more"
    assert us[0] == (f"run {us_run}", first_day)


def test_upcoming_json_is_one_object_per_event_with_utc_instants(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    publish(cli, tmp_path, database, daily(scopes=[]), "daily")
    result = cli("upcoming", "--json", "--count", "2", "--database", database)
    (record,) = [json.loads(line) for line in result.lines]
    assert (record["key"], record["timezone"], record["reminders"]) == ("daily-quiz", "Asia/Tokyo", [])
    ((scope,),) = [record["scopes"]]
    assert scope["scope"] == ""
    assert len(scope["occurrences"]) == 2
    for occurrence in scope["occurrences"]:
        assert occurrence["at_utc"].endswith("T03:00:00Z") and occurrence["run_id"] is None
        assert occurrence["shown"].endswith(NOON_TOKYO)


def test_upcoming_of_an_unknown_or_manual_event_says_so(cli: Cli, tmp_path: Path, database: str) -> None:
    """No scheduled event: said in words. A manual one asked for by name: it has no schedule. A
    key nobody published: one line, exit 1, no traceback."""
    assert cli("upcoming", "--database", database).out.startswith("no scheduled events are published")
    publish(cli, tmp_path, database, event("by-hand", title="By hand"), "manual")
    assert cli("upcoming", "--database", database).out.startswith("no scheduled events are published")
    manual = cli("upcoming", "by-hand", "--database", database)
    assert manual.code == 0
    assert manual.lines == [
        "by-hand ('By hand') v1: manual",
        "  no schedule: it starts only when staff start it",
    ]
    unknown = cli("upcoming", "nope", "--database", database)
    assert (unknown.code, unknown.err) == (1, "error: no published event is called 'nope'\n")


def test_upcoming_of_a_once_far_ahead_shows_it_in_utc(cli: Cli, tmp_path: Path, database: str) -> None:
    publish(cli, tmp_path, database, daily(schedule={"once": "2099-12-05T19:00:00+01:00"}, scopes=[]), "once")
    result = cli("upcoming", "--database", database)
    assert result.lines[1:] == ["  planned   Sat 5 Dec 2099 18:00 UTC"]


def test_runs_with_nothing_created_names_the_next_occurrence(cli: Cli, tmp_path: Path, database: str) -> None:
    """Before: "no runs in flight" and nothing else, though Saturday's event was booked. Now the
    next occurrence is named, with its zone, and where to see the rest."""
    assert cli("runs", "--database", database).lines == [
        "no runs in flight (--all shows finished ones too)",
        "nothing is scheduled: no published event has an occurrence to come",
    ]
    publish(cli, tmp_path, database, daily(), "daily")
    first, second = cli("runs", "--database", database).lines
    assert first == "no runs in flight (--all shows finished ones too)"
    assert re.fullmatch(
        r"no run is scheduled yet; next: daily-quiz at \w{3} \d{1,2} \w{3} \d{4} 12:00 JST \(03:00 UTC\) "
        r"\(`python -m bot upcoming` lists what comes next\)",
        second,
    ), second


def test_runs_counts_the_scheduled_runs_apart_from_those_under_way(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    publish(cli, tmp_path, database, daily(), "daily")
    materialise(database)
    lines = cli("runs", "--database", database).lines
    assert [line.split()[3] for line in lines[1:3]] == ["scheduled", "scheduled"]
    assert lines[3] == (
        "2 runs: 2 scheduled (not started yet), 0 under way; `python -m bot upcoming` lists what comes next"
    )


# ── validate ───────────────────────────────────────────────────────────────


def test_validate_prints_a_scheduled_events_next_three_occurrences(cli: Cli, tmp_path: Path) -> None:
    """Before: validate named the cron, never the dates it means. Now the next three follow the
    "ok" line, in the event's zone and UTC; a manual event has none."""
    path = write_yaml(tmp_path / "daily.yaml", daily())
    manual = write_yaml(tmp_path / "manual.yaml", event("by-hand"))
    result = cli("validate", path, manual)
    assert result.code == 0, result.out
    config_line, ok_line, first, second, third, manual_line, total = result.lines
    assert config_line == "no config: channel and role aliases not checked"
    assert ok_line.startswith(f"ok    {path}: daily-quiz") and manual_line.startswith(f"ok    {manual}: ")
    assert first.startswith("      next: ") and first.endswith(NOON_TOKYO)
    assert all(line.startswith("            ") and line.endswith(NOON_TOKYO) for line in (second, third))
    assert total == "2 valid, 0 invalid"


def test_validate_shows_a_once_ahead_and_refuses_one_already_over_naming_the_date(
    cli: Cli, tmp_path: Path
) -> None:
    ahead = write_yaml(tmp_path / "ahead.yaml", daily(schedule={"once": "2099-12-05T19:00:00+01:00"}))
    over = write_yaml(
        tmp_path / "over.yaml", daily(key="over", schedule={"once": "2020-12-05T19:00:00+01:00"})
    )
    result = cli("validate", ahead, over)
    assert result.code == 1
    assert "      next: Sat 5 Dec 2099 18:00 UTC" in result.lines
    assert f"FAIL  {over}: 1 problem" in result.out
    assert "2020-12-05T19:00:00+01:00 (Sat 05 Dec 2020 18:00 UTC) is in the past" in result.out


def test_upcoming_shows_a_skipped_date_and_a_moved_one_with_where_it_was(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    """Issue 28: a date skipped in the definition is listed as ``skipped`` where it would have
    been, and a moved one at its new time, saying the time it had."""
    today = dt.datetime.now(dt.UTC).astimezone(ZoneInfo("Asia/Tokyo")).date()
    skipped, moved = today + dt.timedelta(days=3), today + dt.timedelta(days=4)
    schedule = {
        "cron": "0 12 * * *",
        "timezone": "Asia/Tokyo",
        "skip": [skipped.isoformat()],
        "moves": {moved.isoformat(): f"{moved} 14:00"},
    }
    publish(cli, tmp_path, database, daily(scopes=[], schedule=schedule), "quiz")
    result = cli("upcoming", "daily-quiz", "--count", "6", "--database", database)
    assert result.code == 0, result.err
    day = f"{skipped:%a} {skipped.day} {skipped:%b} {skipped.year}"
    assert f"  skipped   {day} 12:00 JST (03:00 UTC)" in result.lines
    new_day = f"{moved:%a} {moved.day} {moved:%b} {moved.year}"
    assert (
        f"  planned   {new_day} 14:00 JST (05:00 UTC) (moved from {new_day} 12:00 JST (03:00 UTC))"
        in result.lines
    ), result.lines
