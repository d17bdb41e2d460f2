"""The log lines the command line writes: text or one JSON object a line, the libraries quiet
unless asked, and the token and the database password masked whatever carries them.

``cli.logs.configure`` is called here as ``main`` calls it, on a root logger emptied for the
test (the test harness's own capture handlers are put back after), writing to a string."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli import logs
from cli.common import load_config
from tests.cli.conftest import Cli, write_yaml

TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA.GhIjKl.token-that-must-never-appear-in-a-log"
PASSWORD = "pa55-w0rd/with:odd@chars"
URL = "mysql+asyncmy://eventbot:pa55-w0rd%2Fwith%3Aodd%40chars@db.example:3306/eventbot"
ENVIRONMENT = {"DISCORD_TOKEN": TOKEN, "EVENTBOT_DATABASE_URL": URL}

Configure = Callable[..., io.StringIO]


@pytest.fixture
def configure() -> Iterator[Configure]:
    """``logs.configure`` on an empty root logger; everything it changed is put back."""
    root = logging.getLogger()
    saved_level = root.level
    saved_levels = {name: logging.getLogger(name).level for name in logs.THIRD_PARTY}
    client = logging.getLogger("discord.client")
    saved_filters = list(client.filters)
    harness: list[logging.Handler] = []

    def run(level: int = logging.INFO, **options: object) -> io.StringIO:
        # The test harness adds its capture handlers as the test starts: set them aside here.
        for handler in list(root.handlers):
            if handler.__class__.__module__ != logs.__name__:
                harness.append(handler)
            root.removeHandler(handler)
        stream = io.StringIO()
        options.setdefault("quiet_libraries", True)
        options.setdefault("environ", ENVIRONMENT)
        assert logs.configure(level, stream=stream, **options) is not None  # type: ignore[arg-type]
        return stream

    try:
        yield run
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in harness:
            root.addHandler(handler)
        root.setLevel(saved_level)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        client.filters[:] = saved_filters


def test_json_is_one_object_a_line_with_level_logger_message_and_the_run_and_step_ids(
    configure: Configure,
) -> None:
    stream = configure(log_format="json")
    log = logging.getLogger("runner.engine.steps")
    log.warning("step %s of run %s failed: %s", 7, 42, "timeout", extra={"run_id": 42, "step_id": 7})
    logging.getLogger("bot.cogs.staff_log._loop").info("posted")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert {key: first[key] for key in ("level", "logger", "message", "run_id", "step_id")} == {
        "level": "WARNING",
        "logger": "runner.engine.steps",
        "message": "step 7 of run 42 failed: timeout",
        "run_id": 42,
        "step_id": 7,
    }
    assert first["time"].endswith("+00:00")
    assert second["message"] == "posted" and "run_id" not in second


def test_json_carries_a_traceback_in_its_one_line(configure: Configure) -> None:
    stream = configure(log_format="json")
    try:
        raise ValueError("bad value")
    except ValueError:
        logging.getLogger("bot.errors").exception("unexpected error", extra={"run_id": 3})
    [line] = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["run_id"] == 3
    assert record["exception"].startswith("Traceback") and "ValueError: bad value" in record["exception"]


def test_the_libraries_say_only_warnings_unless_asked(configure: Configure) -> None:
    """Alembic's "Context impl SQLiteImpl." was the first line `run` printed."""
    stream = configure()
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("discord.client").info("logging in using static token")
    logging.getLogger("discord.gateway").warning("Can't keep up, shard ID None websocket is 12.0s behind.")
    logging.getLogger("bot.app").info("logged in as eventbot")
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "WARNING discord.gateway: Can't keep up, shard ID None websocket is 12.0s behind.",
        "INFO bot.app: logged in as eventbot",
    ]
    verbose = configure(quiet_libraries=False)
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("sqlalchemy.engine.Engine").info("SELECT 1")
    assert "INFO alembic.runtime.migration: Context impl SQLiteImpl." in verbose.getvalue()
    assert "SELECT 1" not in verbose.getvalue(), "each SQL statement only with -vv"


@pytest.mark.parametrize("log_format", logs.FORMATS)
def test_the_token_and_the_database_password_never_reach_a_line(
    configure: Configure, log_format: str
) -> None:
    """Defence in depth: the code logs neither, but a library or an exception may."""
    stream = configure(log_format=log_format)
    log = logging.getLogger("discord.http")
    log.warning("request with token %s", TOKEN)
    message = f"the message itself holds {TOKEN} and {PASSWORD}"
    log.warning(message)
    log.warning("in an extra", extra={"header": f"Bot {TOKEN}"})
    log.warning("a url: %s", f"mysql+asyncmy://someone:{PASSWORD}@elsewhere/db")
    log.warning("GET %s", "http://127.0.0.1:8080/api/v10/users/@me")
    log.warning(
        "an unknown token-shaped value: %s", "Nzk5OTk5OTk5OTk5OTk5OTk5.GxYzAb.abcdefghijklmnopqrstuvwxyz0"
    )
    try:
        raise ConnectionError(f"refused for {TOKEN} with {PASSWORD}")
    except ConnectionError:
        log.exception("connect failed")
    text = stream.getvalue()
    assert TOKEN not in text and PASSWORD not in text and "abcdefghijklmnopqrstuvwxyz0" not in text
    if log_format == "json":
        records = [json.loads(line) for line in text.splitlines()]
        assert [r["message"] for r in records] == [
            "request with token ***",
            "the message itself holds *** and ***",
            "in an extra",
            "a url: mysql+asyncmy://someone:***@elsewhere/db",
            "GET http://127.0.0.1:8080/api/v10/users/@me",
            "an unknown token-shaped value: ***",
            "connect failed",
        ]
        assert records[2]["header"] == "Bot ***"
        assert records[6]["exception"].endswith("ConnectionError: refused for *** with ***")
    else:
        lines = [line.split(" ", 2)[2] for line in text.splitlines() if line.startswith("20")]
        assert lines == [
            "WARNING discord.http: request with token ***",
            "WARNING discord.http: the message itself holds *** and ***",
            "WARNING discord.http: in an extra",
            "WARNING discord.http: a url: mysql+asyncmy://someone:***@elsewhere/db",
            "WARNING discord.http: GET http://127.0.0.1:8080/api/v10/users/@me",
            "WARNING discord.http: an unknown token-shaped value: ***",
            "ERROR discord.http: connect failed",
        ]
        assert text.endswith("ConnectionError: refused for *** with ***\n")


def test_a_password_read_from_the_config_file_is_masked_too(
    configure: Configure, cli: Cli, tmp_path: Path
) -> None:
    """The environment's secrets are known when logging starts; the config file's password
    only once the command has read it."""
    stream = configure(environ={})
    config = write_yaml(tmp_path / "config.yaml", {"database_url": "mysql+asyncmy://u:s3cret-from-file@h/db"})
    load_config(str(config))
    logging.getLogger("sqlalchemy.pool").warning("lost connection; password was s3cret-from-file")
    assert stream.getvalue().endswith("lost connection; password was ***\n")


def test_discord_reconnecting_is_one_line_not_a_traceback(configure: Configure) -> None:
    stream = configure()
    try:
        raise OSError(104, "Connection reset by peer")
    except OSError:
        logging.getLogger("discord.client").exception("Attempting a reconnect in %.2fs", 4.2)
    [line] = stream.getvalue().splitlines()
    assert line.endswith(
        " WARNING discord.client: lost the connection to Discord "
        "(ConnectionResetError: [Errno 104] Connection reset by peer); reconnecting in 4.2 s"
    )


def test_the_eventbot_script_is_the_command_line(tmp_path: Path) -> None:
    """pyproject declares ``eventbot = "cli:main"``; installing the project puts it beside the
    interpreter."""
    script = Path(sys.executable).parent / ("eventbot.exe" if sys.platform == "win32" else "eventbot")
    assert script.is_file(), f"{script} is missing: install the project (pip install -e .)"
    shown = subprocess.run([script, "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert shown.returncode == 0
    assert shown.stdout.startswith("usage: eventbot [-h]")
    assert "COMMAND" in shown.stdout and "rehearse" in shown.stdout and "run" in shown.stdout
