"""``python -m bot signups RUN``: the list per option, in click order, as text and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from runner import signups
from runner.migrate import upgrade
from tests.cli.conftest import Cli, on_database, sqlite_url
from tests.signups.booking import T0, book, member


def seeded(tmp_path: Path) -> tuple[str, int]:
    url = sqlite_url(tmp_path / "eventbot.sqlite3")

    async def seed(engine: object) -> int:
        await upgrade(engine)  # type: ignore[arg-type]
        run_id = await book(engine, {"options": {"tank": 1, "dps": 2}, "closes": "1h"})  # type: ignore[arg-type]
        for n, option in ((1, "tank"), (2, "dps"), (3, "tank")):
            member_id, name = member(n)
            await signups.join(engine, run_id, member_id, name, option, (), T0)  # type: ignore[arg-type]
        return run_id

    return url, on_database(url, seed)


def test_the_list_shows_each_option_with_seats_and_the_waiting_list(cli: Cli, tmp_path: Path) -> None:
    url, run_id = seeded(tmp_path)
    result = cli("signups", str(run_id), "--database", url)
    assert result.code == 0, result.err
    assert result.lines[0].startswith(f"run {run_id}: sign-ups ")
    assert "closing Thu 03 Sep 2026 11:00 UTC (1h before the start)" in result.lines[0]
    assert result.lines[1:] == [
        "tank (1/1):",
        f"  1. member1 ({member(1)[0]})  confirmed  #1",
        f"  waiting 1. member3 ({member(3)[0]})  waitlisted  #3",
        "dps (1/2):",
        f"  1. member2 ({member(2)[0]})  confirmed  #2",
        "confirmed 2, waiting 1",
    ]


def test_json_is_one_object_per_member(cli: Cli, tmp_path: Path) -> None:
    url, run_id = seeded(tmp_path)
    result = cli("signups", str(run_id), "--json", "--database", url)
    records = [json.loads(line) for line in result.lines]
    assert [(r["option"], r["member"], r["status"], r["position"]) for r in records] == [
        ("tank", "member1", "confirmed", 1),
        ("tank", "member3", "waitlisted", 3),
        ("dps", "member2", "confirmed", 2),
    ]


def test_a_run_without_a_sign_up_is_said_in_one_line(cli: Cli, tmp_path: Path) -> None:
    url, _ = seeded(tmp_path)
    result = cli("signups", "999", "--database", url)
    assert result.code == 1
    assert "run 999 does not exist or its event has no sign-up" in result.err


def test_sign_ups_open_until_the_run_ends_say_so(cli: Cli, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "eventbot.sqlite3")

    async def seed(engine: object) -> int:
        await upgrade(engine)  # type: ignore[arg-type]
        return await book(engine, {"options": ["going"], "closes": "end"})  # type: ignore[arg-type]

    run_id = on_database(url, seed)
    result = cli("signups", str(run_id), "--database", url)
    assert result.code == 0, result.err
    assert result.lines[0] == f"run {run_id}: sign-ups open, closing when the run ends"
