"""One redactor (``runner.redaction``) everywhere a secret could be shown: the same token in a
DSN, a header and an exception message comes out the same in a log line (its message, its
extras, its traceback), a configuration problem, the command line's one-line error and every
printed database URL; only the mask is the reader's (``***``, or words in a config problem).

Before, the token's pattern was written twice (the log filter's and the config's), a URL's
password was hidden three ways (the log filter, ``masked_url``, the bot's own rendering), and
the command line printed its errors as they came."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

import cli as cli_package
from bot.app import database_shown
from cli import logs
from cli.common import CommandFailed, UsageError, checked_database, load_config, shown_url
from runner.db import DatabaseUrlError, check_url, create_engine
from runner.redaction import MASK, Redactor, masked_url
from tests.cli.conftest import Cli
from tests.cli.test_logs import Configure, configure  # noqa: F401 (the fixture)
from wiring.config import SECRET_SHOWN, ConfigError

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("runner", "bot", "actions", "cli", "wiring", "rehearsal")

TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA.GhIjKl.a-token-every-site-must-hide"
PASSWORD = "pw-in-a-dsn"
DSN = f"mysql+asyncmy://eventbot:{PASSWORD}@db.example:3306/eventbot"
HEADER = f"Authorization: Bot {TOKEN}"
TEXT = f"connect to {DSN} failed; sent {HEADER}"
SHOWN_DSN = "mysql+asyncmy://eventbot:***@db.example:3306/eventbot"
# What every site shows for TEXT, with its own mask.
SHOWN = f"connect to {SHOWN_DSN} failed; sent Authorization: Bot ***"


def shown_with(mask: str) -> str:
    return SHOWN.replace(MASK, mask)


def test_the_rules_themselves_hide_the_dsn_password_and_the_token() -> None:
    assert Redactor().redact(TEXT) == SHOWN
    assert Redactor(mask=SECRET_SHOWN, long_runs=True).redact(TEXT) == shown_with(SECRET_SHOWN)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_log_line_hides_them_in_its_message_extras_and_traceback(
    configure: Configure,  # noqa: F811 (the fixture imported above)
    log_format: str,
) -> None:
    stream = configure(log_format=log_format, environ={})
    log = logging.getLogger("discord.http")
    log.warning(TEXT)
    log.warning("request", extra={"header": HEADER})
    try:
        raise ConnectionError(TEXT)
    except ConnectionError:
        log.exception("connect failed")
    written = stream.getvalue()
    assert TOKEN not in written and PASSWORD not in written
    if log_format == "json":
        message, extra, failure = (json.loads(line) for line in written.splitlines())
        assert message["message"] == SHOWN
        assert extra["header"] == "Authorization: Bot ***"
        assert failure["exception"].endswith(f"ConnectionError: {SHOWN}")
    else:
        assert written.splitlines()[0].endswith(f"discord.http: {SHOWN}")
        assert "request" in written.splitlines()[1]
        assert written.endswith(f"ConnectionError: {SHOWN}\n")


def test_a_configuration_problem_hides_them_in_words() -> None:
    assert ConfigError([TEXT]).problems == [shown_with(SECRET_SHOWN)]


@pytest.mark.parametrize("error", [CommandFailed, UsageError])
def test_the_command_lines_one_line_error_hides_them(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    """An error is written never to hold a secret; one that quotes a driver's or Discord's own
    text is still shown redacted."""

    def fails(_: object) -> int:
        raise error(TEXT)

    monkeypatch.setattr(cli_package, "cmd_health", fails)
    result = cli("health")
    assert result.err == f"error: {SHOWN}\n"


def test_a_secret_the_environment_holds_is_hidden_in_an_error_whatever_its_shape(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log lines already hid the environment's token and password by value; the command
    line's errors now do too."""
    monkeypatch.setenv("DISCORD_TOKEN", "not-shaped-like-a-token")

    def fails(_: object) -> int:
        raise CommandFailed("Discord said: not-shaped-like-a-token is unknown")

    monkeypatch.setattr(cli_package, "cmd_health", fails)
    assert cli("health").err == "error: Discord said: *** is unknown\n"


def test_every_printed_database_url_hides_the_password_as_the_text_rules_do() -> None:
    assert masked_url(DSN) == shown_url(DSN) == Redactor().redact(DSN) == SHOWN_DSN
    assert database_shown(create_engine(DSN)) == SHOWN_DSN
    refused = f"{DSN}?colour=blue"
    with pytest.raises(DatabaseUrlError) as raised:
        check_url(refused)
    assert PASSWORD not in str(raised.value) and SHOWN_DSN in str(raised.value)
    with pytest.raises(UsageError) as usage:
        checked_database(refused)
    assert PASSWORD not in str(usage.value) and SHOWN_DSN in str(usage.value)


def test_no_module_but_runner_redaction_holds_a_rule_for_hiding_secrets() -> None:
    """A second copy of the token's pattern, or a URL rendered with its password hidden by hand,
    is how the three ways of hiding came about."""
    rules = re.compile(r"hide_password=True|\{20,\}\\\.|\{48,\}|://\[\^")
    elsewhere = sorted(
        str(path.relative_to(REPO))
        for package in SOURCES
        for path in (REPO / package).rglob("*.py")
        if path != REPO / "runner" / "redaction.py" and rules.search(path.read_text(encoding="utf-8"))
    )
    assert elsewhere == []


def test_the_log_redactor_and_the_errors_share_one_list_of_secrets(
    configure: Configure,  # noqa: F811 (the fixture imported above)
) -> None:
    """A password read from the config file after logging started is hidden in both."""
    stream = configure(environ={})
    logs.keep_secret("s3cret-from-file")
    logging.getLogger("sqlalchemy.pool").warning("password was s3cret-from-file")
    assert stream.getvalue().endswith("password was ***\n")
    assert logs.redacted("password was s3cret-from-file") == "password was ***"


def test_a_game_servers_password_read_by_the_config_is_hidden_in_every_log_line(
    configure: Configure,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The RCON password and the webhook secret live in variables the config names, not in a
    variable the redactor knew of: once the config is read they are hidden like the database's."""
    monkeypatch.setenv("EVENTBOT_GAME_RCON_PASSWORD", "rcon-pass-from-env")
    monkeypatch.setenv("EVENTBOT_REWARDS_WEBHOOK_SECRET", "whsec_c2VjcmV0LWtleQ==")
    config = tmp_path / "config.yaml"
    config.write_text(
        "rcon:\n  game: {host: mc.example.com, password_env: EVENTBOT_GAME_RCON_PASSWORD}\n"
        "webhooks:\n  rewards: {url: 'https://game.example/hook', secret_env: EVENTBOT_REWARDS_WEBHOOK_SECRET}\n",
        encoding="utf-8",
    )
    stream = configure(environ={})
    load_config(str(config))
    logging.getLogger("rcon").warning("login with rcon-pass-from-env and whsec_c2VjcmV0LWtleQ== failed")
    assert stream.getvalue().endswith("login with *** and *** failed\n")
