"""``python -m bot health``: the health view in plain lines or JSON, and an exit code a monitor
can act on (0 healthy, 1 a problem, 3 the database cannot be reached, in one line)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from cli.health import EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_UNREACHABLE
from runner.clock import SystemClock, utcnow
from runner.heartbeat import Heartbeat
from tests.cli.conftest import Cli, on_database, sqlite_url
from tests.support.plugins import install
from tests.support.world import T0, World, phase, step


@pytest.fixture
def database(cli: Cli, tmp_path: Path) -> str:
    SEEDED.clear()
    url = sqlite_url(tmp_path / "eventbot.sqlite3")
    assert cli("migrate", "--database", url).code == 0
    return url


def beat(url: str, owner: str = "box:4242:cafe", *, seen: dt.datetime | None = None) -> None:
    """A bot process's heartbeat, written as the bot's loop writes it."""

    class At:
        def now(self) -> dt.datetime:
            return seen or utcnow()

    async def work(engine: AsyncEngine) -> None:
        heartbeat = Heartbeat(
            engine, owner, At() if seen else SystemClock(), interval=5, host="box", pid=4242
        )
        assert await heartbeat.beat()

    on_database(url, work)


SEEDED: list[int] = []


def seed_run(url: str, **values: object) -> int:
    """A run of a two-step event, with the columns ``values`` names set by hand. It is created due
    (its wake is its scheduled time, in the past), so unless a test says otherwise it is overdue."""

    async def work(engine: AsyncEngine) -> int:
        world = World(engine)
        # Each a run of the one event ``seed-1``, at an occurrence of its own.
        at = T0 + dt.timedelta(minutes=len(SEEDED))
        run_id = await world.seed_run([phase("main", step("test.a"), step("test.b"))], scheduled_for=at)
        SEEDED.append(run_id)
        if values:
            await world.set_run(run_id, **values)
        return run_id

    return on_database(url, work)


def test_a_live_process_and_nothing_wrong_is_healthy(cli: Cli, database: str) -> None:
    beat(database)
    held = seed_run(database, claimed_by="box:4242:cafe", claim_expires_at=utcnow() + dt.timedelta(minutes=1))
    result = cli("health", "--database", database)
    assert result.code == EXIT_HEALTHY, result.out
    assert result.lines[0].endswith(": healthy")
    assert result.lines[1].startswith("database: sqlite, reachable, ")
    assert " ms a query, schema " in result.lines[1] and result.lines[1].endswith("(current)")
    (process,) = [line for line in result.lines if line.startswith("process ")]
    assert process.startswith("process box:4242:cafe (host box, pid 4242): alive, seen ")
    assert process.endswith(f"; holds runs {held}")
    assert "runs stalled or degraded: 0" in result.lines
    assert "runs due but not picked up (more than 30 s late): 0" in result.lines
    assert not [line for line in result.lines if line.startswith(("problem:", "warning:"))]


def test_no_bot_process_is_a_problem(cli: Cli, database: str) -> None:
    result = cli("health", "--database", database)
    assert result.code == EXIT_UNHEALTHY
    assert result.lines[0].endswith("UNHEALTHY (1 problem)")
    assert "processes: none has ever written a heartbeat here" in result.lines
    assert result.lines[-1] == (
        "problem: no bot process is running: none has written a heartbeat lately "
        "(start it with python -m bot run)"
    )


def test_a_stalled_run_is_a_problem_and_a_degraded_one_a_warning(cli: Cli, database: str) -> None:
    beat(database)
    degraded = seed_run(
        database, status="running", health="degraded", last_error="step 2 failed:\nboom", wake_at=None
    )
    result = cli("health", "--database", database)
    assert result.code == EXIT_HEALTHY, "a degraded run carries on: a warning only"
    assert f"  run {degraded} seed-1: running, degraded; last error: step 2 failed: boom" in result.lines
    assert "warning: 1 run degraded: a step failed or was retried, and the run carried on" in result.lines

    stalled = seed_run(database, status="running", health="stalled", wake_at=None)
    result = cli("health", "--database", database)
    assert result.code == EXIT_UNHEALTHY
    listed = result.lines.index("runs stalled or degraded: 2")
    assert result.lines[listed + 1] == f"  run {stalled} seed-1: running, stalled"
    assert "problem: 1 run stalled: nobody has advanced it when due" in result.lines


def test_a_run_due_that_nobody_picks_up_is_a_problem(cli: Cli, database: str) -> None:
    beat(database)
    late = seed_run(database, wake_at=utcnow() - dt.timedelta(minutes=10))
    result = cli("health", "--database", database)
    assert result.code == EXIT_UNHEALTHY
    listed = result.lines.index("runs due but not picked up (more than 30 s late): 1")
    assert result.lines[listed + 1] == f"  run {late} seed-1: scheduled, ok, due 10 min ago"
    assert any(
        line.startswith("problem: 1 run due but not picked up, the oldest for 10 min")
        for line in result.lines
    )


def test_a_process_that_stopped_beating_is_named(cli: Cli, database: str) -> None:
    beat(database, "gone:1:dead", seen=utcnow() - dt.timedelta(minutes=5))
    beat(database)
    result = cli("health", "--database", database)
    assert result.code == EXIT_HEALTHY, "another process is alive"
    processes = [line for line in result.lines if line.startswith("process ")]
    assert processes[0].startswith("process box:4242:cafe"), "the live first"
    assert processes[1].startswith("process gone:1:dead (host box, pid 4242): NOT SEEN for 5 min")
    assert any(
        line.startswith("warning: process gone:1:dead on box has not been seen for 5 min")
        for line in result.lines
    )


def test_json_carries_the_whole_view(cli: Cli, database: str) -> None:
    beat(database)
    held = seed_run(database, claimed_by="box:4242:cafe", claim_expires_at=utcnow() + dt.timedelta(minutes=1))
    stranger = seed_run(database, claimed_by="cli:1:x", claim_expires_at=utcnow() + dt.timedelta(minutes=1))
    result = cli("health", "--database", database, "--json")
    assert result.code == EXIT_HEALTHY
    data = json.loads(result.out)
    assert data["healthy"] is True and data["problems"] == [] and data["warnings"] == []
    assert data["database"]["reachable"] is True and data["database"]["latency_ms"] > 0
    (process,) = data["processes"]
    assert (process["owner"], process["alive"], process["lagging"], process["runs"]) == (
        "box:4242:cafe",
        True,
        False,
        [held],
    )
    assert process["last_seen"].endswith("Z")
    assert data["other_holders"] == [{"owner": "cli:1:x", "runs": [stranger], "steps": []}]


def test_a_refused_action_plugin_is_a_problem(
    cli: Cli, database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Installed beside the bot and refused, a plugin's actions are missing from every event
    that names them: the monitor hears of it, in the plain lines and the JSON alike."""
    beat(database)
    install(
        monkeypatch, tmp_path, "eventbot-shop", {"shop": "shop_plugin:register"}, {"shop_plugin": "1/0\n"}
    )
    problem = "plugin shop (eventbot-shop 1.0): could not be imported: ZeroDivisionError: division by zero"
    result = cli("health", "--database", database)
    assert result.code == EXIT_UNHEALTHY
    assert result.lines[0].endswith(": UNHEALTHY (1 problem)")
    assert f"problem: {problem}" in result.lines
    data = json.loads(cli("health", "--database", database, "--json").out)
    assert data["healthy"] is False and data["problems"] == [problem]


def test_a_database_that_cannot_be_reached_is_one_line_and_its_own_exit_code(
    cli: Cli, tmp_path: Path
) -> None:
    result = cli("health", "--database", "mysql+asyncmy://eventbot:s3cret@127.0.0.1:1/eventbot")
    assert result.code == EXIT_UNREACHABLE
    assert result.out == ""
    (line,) = result.err.splitlines()
    assert line.startswith(
        "error: cannot reach the database at mysql+asyncmy://eventbot:***@127.0.0.1:1/eventbot: "
    )
    assert "s3cret" not in result.err and "Traceback" not in result.err

    as_json = cli("health", "--database", "mysql+asyncmy://eventbot:s3cret@127.0.0.1:1/eventbot", "--json")
    assert as_json.code == EXIT_UNREACHABLE
    data = json.loads(as_json.out)
    assert data["healthy"] is False and data["database"]["reachable"] is False
    assert "s3cret" not in as_json.out


def test_a_missing_sqlite_file_is_unreachable_and_is_not_created(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "nowhere.sqlite3"
    result = cli("health", "--database", sqlite_url(path))
    assert result.code == EXIT_UNREACHABLE
    assert result.err.startswith(f"error: no database at {path}: run `python -m bot migrate` first")
    assert not path.exists()


def test_a_database_behind_the_code_says_to_migrate(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    path.touch()
    result = cli("health", "--database", sqlite_url(path))
    assert result.code == EXIT_UNHEALTHY
    assert result.lines[1].startswith("database: sqlite, reachable, ")
    assert "schema none (this code needs " in result.lines[1]
    assert result.lines[-1].startswith("problem: the database is at schema none, this code needs ")
    assert result.lines[-1].endswith(": run python -m bot migrate")
