"""``python -m bot run`` as an operator starts it: the real command in its own process, with
Discord's API at a loopback port where nothing listens, or served by a loopback stand-in, and
the database at a closed port. It keeps trying with one plain line per attempt, stops cleanly
on SIGTERM and Ctrl-C, and fails at once, in one line, on what waiting cannot fix.

Timing: each process spends most of its life importing (seconds on a loaded machine); the
waits below are generous deadlines, not how long a test takes.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import discord
import pytest
from sqlalchemy.engine import make_url

from bot.startup import API_BASE_ENV, GATEWAY_ENV
from tests.cli.conftest import REPO, Cli, sqlite_url, write_yaml
from tests.support.loopback_discord import LoopbackDiscord, closed_port

TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA.GhIjKl.token-that-must-never-appear-in-a-log"
PASSWORD = "db-Pa55word-never-shown"
GUILD = 100000000000000001
FAST = ("--retry-first", "0.05", "--retry-cap", "0.2")
# Deadlines: a process's first line comes after its imports; a stop needs no imports.
FIRST_LINE_WITHIN = 30.0
STOPPED_WITHIN = 10.0
USER = {"id": "200000000000000002", "username": "eventbot", "discriminator": "0", "avatar": None, "bot": True}


class Process:
    """The real command line in a subprocess, its standard error read as the lines come."""

    def __init__(self, cwd: Path, *argv: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", *argv],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.line_times: dict[str, float] = {}  # time.monotonic() each line was read
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.line_times.setdefault(line.rstrip("\n"), time.monotonic())
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: re.Pattern[str], count: int) -> list[re.Match[str]]:
        """Read standard error until ``count`` lines match ``pattern``; fail at the deadline or
        if the process ends first."""
        deadline = time.monotonic() + FIRST_LINE_WITHIN
        matches = [m for m in map(pattern.search, self.lines) if m]
        while len(matches) < count:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                pytest.fail(f"no {count} lines matching {pattern.pattern!r} in time; last: {self.lines[-3:]}")
            if line is None:
                pytest.fail(f"the process ended ({self.process.wait()}) before that; last: {self.lines[-3:]}")
            self.lines.append(line)
            if match := pattern.search(line):
                matches.append(match)
        return matches

    def finish(self, within: float) -> int:
        """Wait for the process to end; answer its exit code, with every line read."""
        try:
            code = self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {within} s later; last: {self.lines[-3:]}")
        self._reader.join(timeout=10)
        while (line := self._queue.get_nowait() if not self._queue.empty() else None) is not None:
            self.lines.append(line)
        self._close_pipes()
        return code

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def environment(**variables: str) -> dict[str, str]:
    """This process's environment without the developer's EVENTBOT_* and token, plus ``variables``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("EVENTBOT_") and name != "DISCORD_TOKEN"
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(variables)
    return env


@pytest.fixture
def migrated(cli: Cli, tmp_path: Path) -> str:
    """A SQLite database at the code's schema, named by ./config.yaml with the guild."""
    url = sqlite_url(tmp_path / "eventbot.sqlite3")
    assert cli("migrate", "--database", url).code == 0
    write_yaml(tmp_path / "config.yaml", {"guild_id": GUILD, "database_url": url})
    return url


def retry_line(what: str) -> re.Pattern[str]:
    return re.compile(rf" WARNING bot\.startup: cannot reach {what}; retrying in (?P<delay>[0-9.]+) s$")


def assert_clean(output: str) -> None:
    """What no run may print: a traceback, a library's chatter, or a secret."""
    assert "Traceback" not in output
    assert "alembic" not in output.lower(), "Alembic's INFO lines are noise to an operator"
    assert "PyNaCl" not in output and "voice" not in output
    assert TOKEN not in output and PASSWORD not in output


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_keeps_trying_discord_one_plain_line_a_try_and_stops_cleanly_on_a_signal(
    migrated: str, tmp_path: Path, stop: signal.Signals
) -> None:
    """The defect: with no network, `run` printed an 83-line traceback after 0.8 s and exited."""
    with closed_port() as port:
        bot = Process(
            tmp_path,
            "run",
            *FAST,
            env=environment(DISCORD_TOKEN=TOKEN, **{API_BASE_ENV: f"http://127.0.0.1:{port}/api/v10"}),
        )
        tries = bot.wait_for(retry_line(rf"Discord: 127\.0\.0\.1:{port}: connection refused"), 4)
        bot.process.send_signal(stop)
        code = bot.finish(STOPPED_WITHIN)
    assert code == 0, bot.output
    # First 0.05 s, doubling, capped at 0.2 s.
    assert [m["delay"] for m in tries] == ["0.05", "0.1", "0.2", "0.2"]
    assert bot.lines[-2:] == [
        bot.lines[-2][:23]
        + f" INFO cli.serve: {stop.name} received: stopping (runs keep their state and are given back)",
        bot.lines[-1][:23] + f" INFO cli.serve: stopped on {stop.name}",
    ]
    assert_clean(bot.output)
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (WARNING|INFO) ", line) for line in bot.lines)


def test_run_logs_one_json_object_a_line_with_log_format_json(migrated: str, tmp_path: Path) -> None:
    with closed_port() as port:
        env = environment(DISCORD_TOKEN=TOKEN, **{API_BASE_ENV: f"http://127.0.0.1:{port}/api/v10"})
        bot = Process(tmp_path, "--log-format", "json", "run", *FAST, env=env)
        bot.wait_for(re.compile(r'"attempt": 2'), 1)
        bot.process.send_signal(signal.SIGTERM)
        assert bot.finish(STOPPED_WITHIN) == 0
    records = [json.loads(line) for line in bot.lines]
    first = records[0]
    assert first["level"] == "WARNING" and first["logger"] == "bot.startup" and first["attempt"] == 1
    assert (
        first["message"] == f"cannot reach Discord: 127.0.0.1:{port}: connection refused; retrying in 0.05 s"
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", first["time"])
    assert records[-1]["message"] == "stopped on SIGTERM"
    assert_clean(bot.output)


def test_defect_a_refused_token_is_one_line_at_once_with_no_retry(migrated: str, tmp_path: Path) -> None:
    """Discord's answer to a bad token (401 on the login) cannot change by waiting."""
    unauthorized = (401, {"message": "401: Unauthorized", "code": 0})
    with LoopbackDiscord({("GET", "/users/@me"): unauthorized}) as discord_api:
        bot = Process(
            tmp_path, "run", *FAST, env=environment(DISCORD_TOKEN=TOKEN, **{API_BASE_ENV: discord_api.base})
        )
        code = bot.finish(FIRST_LINE_WITHIN)
        requests = list(discord_api.requests)
    assert code == 1
    assert bot.lines == ["error: Discord refused the token in DISCORD_TOKEN (it is not a valid bot token)"]
    assert [(r.method, r.path) for r in requests] == [("GET", "/users/@me")], "no retry"
    # The line comes at once; the process's own exit (Python freeing its modules) follows it.
    assert bot.line_times[bot.lines[0]] - requests[0].at < 1.0


def test_run_keeps_trying_a_database_that_refuses_connections_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    with closed_port() as database_port, closed_port() as discord_port:
        url = f"mysql+asyncmy://eventbot:{PASSWORD}@127.0.0.1:{database_port}/eventbot"
        write_yaml(tmp_path / "config.yaml", {"guild_id": GUILD, "database_url": url})
        env = environment(DISCORD_TOKEN=TOKEN, **{API_BASE_ENV: f"http://127.0.0.1:{discord_port}/api/v10"})
        bot = Process(tmp_path, "run", *FAST, env=env)
        shown = re.escape(f"mysql+asyncmy://eventbot:***@127.0.0.1:{database_port}/eventbot")
        tries = bot.wait_for(
            retry_line(
                rf"the database at {shown}: Can't connect to MySQL server on '127\.0\.0\.1' .* \(error 2003\)"
            ),
            3,
        )
        bot.process.send_signal(signal.SIGTERM)
        assert bot.finish(STOPPED_WITHIN) == 0, bot.output
    assert [m["delay"] for m in tries] == ["0.05", "0.1", "0.2"]
    assert "Discord" not in bot.output, "Discord is tried only once the database answers"
    assert_clean(bot.output)


# ── In this process: what fails in one line (no signal, no retry loop to watch) ──────────────


@pytest.fixture
def discord_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Point this process's discord.py at a loopback address, put back after the test."""
    monkeypatch.setattr(discord.http.Route, "BASE", discord.http.Route.BASE)

    def point(base: str) -> None:
        monkeypatch.setenv(API_BASE_ENV, base)

    return point


APPLICATION = {
    "id": "300000000000000003",
    "name": "eventbot",
    "description": "",
    "icon": None,
    "bot_public": False,
    "bot_require_code_grant": False,
    "owner": {**USER, "id": "400000000000000004", "bot": False},
    "verify_key": "00",
    "flags": 0,
}
LOGGED_IN = {("GET", "/users/@me"): (200, USER), ("GET", "/oauth2/applications/@me"): (200, APPLICATION)}


def test_defect_sync_without_a_guild_asks_for_global_instead_of_registering_everywhere(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, discord_at: Callable[[str], None]
) -> None:
    """It used to register globally, which Discord can take an hour to show, without being asked."""
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    with LoopbackDiscord(LOGGED_IN) as discord_api:
        discord_at(discord_api.base)
        result = cli("sync")
        requests = list(discord_api.requests)
    assert result.code == 2
    assert result.out == ""
    assert result.err == (
        "error: no guild to register the commands in: pass --guild ID or set guild_id in the config "
        "(or --global for every server the bot is in; Discord can take up to an hour to show them)\n"
    )
    assert requests == [], "nothing is registered, nor even logged in"


def test_sync_fails_in_one_line_when_discord_cannot_be_reached(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, discord_at: Callable[[str], None]
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    with closed_port() as port:
        discord_at(f"http://127.0.0.1:{port}/api/v10")
        result = cli("sync", "--guild", str(GUILD))
    assert result.code == 1
    assert result.err == f"error: cannot reach Discord: 127.0.0.1:{port}: connection refused\n"


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        (
            {("GET", "/users/@me"): (401, {"message": "401: Unauthorized", "code": 0})},
            "error: Discord refused the token in DISCORD_TOKEN (it is not a valid bot token)",
        ),
        (
            {
                **LOGGED_IN,
                ("PUT", f"/applications/{APPLICATION['id']}/guilds/{GUILD}/commands"): (
                    403,
                    {"message": "Missing Access", "code": 50001},
                ),
            },
            f"error: Discord refused to register the commands in guild {GUILD}: 403 Missing Access "
            "(is the bot in that server, invited with the applications.commands scope?)",
        ),
    ],
    ids=["token refused", "guild refused"],
)
def test_sync_fails_in_one_line_when_discord_refuses(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    discord_at: Callable[[str], None],
    routes: dict[tuple[str, str], tuple[int, Any]],
    expected: str,
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    with LoopbackDiscord(routes) as discord_api:
        discord_at(discord_api.base)
        result = cli("sync", "--guild", str(GUILD))
    assert result.code == 1
    assert result.err == expected + "\n"
    assert TOKEN not in result.out + result.err


def test_run_on_a_database_at_another_schema_fails_in_one_line_without_retrying(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, discord_at: Callable[[str], None]
) -> None:
    """Not a database that is not up yet: waiting will not migrate it."""
    url = sqlite_url(tmp_path / "never-migrated.sqlite3")
    write_yaml(tmp_path / "config.yaml", {"guild_id": GUILD, "database_url": url})
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    with closed_port() as port:
        discord_at(f"http://127.0.0.1:{port}/api/v10")
        result = cli("run", *FAST)
    assert result.code == 1
    assert re.fullmatch(
        rf"error: the database at {re.escape(url)} is at schema none, this code needs \w+: "
        r"run the migrations first \(python -m bot migrate\)\n",
        result.err,
    )


@pytest.mark.mariadb
def test_run_on_a_database_that_refuses_the_password_fails_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mariadb_database: str
) -> None:
    """Access denied is the database's answer, not its absence: no retry, and no password shown."""
    url = make_url(mariadb_database).set(password=PASSWORD).render_as_string(hide_password=False)
    write_yaml(tmp_path / "config.yaml", {"guild_id": GUILD, "database_url": url})
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    result = cli("run", *FAST)
    assert result.code == 1
    shown = make_url(url).render_as_string(hide_password=True)
    assert result.err.startswith(
        f"error: the database at {shown} refused the connection: Access denied for user"
    )
    assert result.err.endswith("(error 1045)\n")
    assert result.err.count("\n") == 1
    assert PASSWORD not in result.err


def test_sigterm_while_serving_closes_the_bot_and_gives_its_runs_back(migrated: str, tmp_path: Path) -> None:
    """The whole way: logged in against a loopback Discord, connected to its gateway, ticking;
    then SIGTERM closes the bot (``EventBot.close``: the runner lets go of its runs) and the
    process ends with 0."""
    ready = {
        "v": 10,
        "user": USER,
        "guilds": [],
        "session_id": "loopback-session",
        "resume_gateway_url": "ws://127.0.0.1:1/unused",
        "application": {"id": APPLICATION["id"], "flags": 0},
    }
    routes = {**LOGGED_IN, ("GET", "/gateway/bot"): (404, {"message": "unused", "code": 0})}
    with LoopbackDiscord(routes, ready=ready) as discord_api:
        env = environment(
            DISCORD_TOKEN=TOKEN, **{API_BASE_ENV: discord_api.base, GATEWAY_ENV: discord_api.gateway}
        )
        bot = Process(tmp_path, "run", "-v", *FAST, env=env)
        bot.wait_for(re.compile(r"INFO bot\.serving: logged in as eventbot; serving guild " + str(GUILD)), 1)
        bot.wait_for(re.compile(r"INFO discord\.gateway: Shard ID None has connected to Gateway"), 1)
        bot.process.send_signal(signal.SIGTERM)
        code = bot.finish(STOPPED_WITHIN)
        identified = [frame for frame in discord_api.received if frame["op"] == 2]
    assert code == 0, bot.output
    assert len(identified) == 1 and identified[0]["d"]["token"] == TOKEN
    messages = [line.split(" ", 3)[-1] for line in bot.lines]
    stopping = messages.index(
        "cli.serve: SIGTERM received: stopping (runs keep their state and are given back)"
    )
    assert messages[stopping + 1 :] == [
        "bot.serving: disconnected from Discord; the runs in hand here were given back",
        "cli.serve: stopped on SIGTERM",
    ]
    assert "Traceback" not in bot.output and TOKEN not in bot.output


def test_a_token_the_gateway_refuses_is_one_line_at_once_with_no_retry(migrated: str, tmp_path: Path) -> None:
    """The login can pass and the gateway still refuse the token (close code 4004)."""
    ready = {"v": 10, "user": USER, "guilds": [], "session_id": "s", "application": {"id": APPLICATION["id"]}}
    with LoopbackDiscord(LOGGED_IN, ready=ready, close_code=4004) as discord_api:
        env = environment(
            DISCORD_TOKEN=TOKEN, **{API_BASE_ENV: discord_api.base, GATEWAY_ENV: discord_api.gateway}
        )
        bot = Process(tmp_path, "run", *FAST, env=env)
        code = bot.finish(FIRST_LINE_WITHIN)
        identified = [frame for frame in discord_api.received if frame["op"] == 2]
    assert code == 1
    assert len(identified) == 1, "no retry"
    assert bot.lines[-1] == "error: Discord refused the token in DISCORD_TOKEN (it is not a valid bot token)"
    assert_clean(bot.output)


def test_defect_a_gateway_that_does_not_answer_after_the_login_is_tried_again_not_a_traceback(
    migrated: str, tmp_path: Path
) -> None:
    """discord.py 2.7, when its first gateway connection fails, reads the state of a previous
    connection that does not exist (``AttributeError: 'NoneType' object has no attribute
    'sequence'``): the bot died with a traceback whenever Discord's API answered and its gateway
    did not. Now the whole attempt (a new bot, a new login) is tried again."""
    with LoopbackDiscord(LOGGED_IN) as discord_api, closed_port() as gateway_port:
        env = environment(
            DISCORD_TOKEN=TOKEN,
            **{API_BASE_ENV: discord_api.base, GATEWAY_ENV: f"ws://127.0.0.1:{gateway_port}/gateway"},
        )
        bot = Process(tmp_path, "run", *FAST, env=env)
        bot.wait_for(retry_line(rf"Discord: 127\.0\.0\.1:{gateway_port}: connection refused"), 2)
        bot.process.send_signal(signal.SIGTERM)
        code = bot.finish(STOPPED_WITHIN)
        logins = [r for r in discord_api.requests if r.path == "/users/@me"]
    assert code == 0, bot.output
    assert len(logins) >= 2, "each attempt logs in again, on a new bot"
    assert sum("logged in as eventbot" in line for line in bot.lines) == 1
    assert "disconnected from Discord" not in bot.output, "it never was connected"
    assert_clean(bot.output)


def test_run_refuses_a_retry_cap_below_the_first_wait(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    write_yaml(Path("config.yaml"), {"guild_id": GUILD})
    result = cli("run", "--retry-first", "5", "--retry-cap", "1")
    assert (result.code, result.err) == (2, "error: --retry-cap must be at least --retry-first\n")


def test_run_on_a_sqlite_file_in_a_missing_directory_fails_in_one_line_without_retrying(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not a database that is not up yet: a directory does not appear by waiting."""
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    url = sqlite_url(tmp_path / "no-such-dir" / "eventbot.sqlite3")
    write_yaml(tmp_path / "config.yaml", {"guild_id": GUILD, "database_url": url})
    result = cli("run", *FAST)
    assert result.code == 1
    assert result.err == (
        f"error: cannot use the database at {url}: the directory {tmp_path / 'no-such-dir'} does not exist\n"
    )


def test_sync_reports_a_discord_outage_by_its_status_alone(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, discord_at: Callable[[str], None]
) -> None:
    """A 502 in front of Discord's API answers an HTML page; the line says the status."""
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    monkeypatch.setattr(asyncio, "sleep", _no_wait(asyncio.sleep))  # discord.py's own retries of a 5xx
    outage = (502, {"message": "<html>" + "x" * 500 + "</html>", "code": 0})
    with LoopbackDiscord({("GET", "/users/@me"): outage}) as discord_api:
        discord_at(discord_api.base)
        result = cli("sync", "--guild", str(GUILD))
    assert result.code == 1
    assert result.err == "error: cannot reach Discord: Discord answered 502 Bad Gateway\n"


def _no_wait(sleep: Callable[[float], Any]) -> Callable[[float], Any]:
    async def short(delay: float, *args: Any) -> Any:
        return await sleep(min(delay, 0.01), *args)

    return short
