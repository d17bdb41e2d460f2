"""A bad config file or database URL is one located line, never a traceback: the command-line
defects of issue 8 on the ``--config`` side (6), database URLs (7), the config's bounds (11) and
what the config fuzz found. Each test is named for its defect and says what happened before and
what must happen now. (Defect 15, kept rehearsal databases, is in ``test_rehearsal_resume.py``.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runner.db import DatabaseUrlError, check_url, create_engine
from tests.cli.conftest import (
    EXAMPLE_CONFIG,
    Cli,
    announce,
    definition,
    write_yaml,
)
from wiring.config import ConfigError, load

PASSWORD = "hunter2-Sw0rdf1sh"


def _only_one_problem_line(err: str, source: Path) -> str:
    """The CLI's config refusal: the header, then exactly one problem line; that line."""
    lines = err.splitlines()
    assert "Traceback" not in err
    assert lines[0] == f"the configuration is not valid ({source}):", err
    assert len(lines) == 2, err
    return lines[1]


# ── defect 6: tracebacks from --config ──────────────────────────────────────


def test_defect_06_a_config_file_that_is_not_utf8_is_one_located_line(cli: Cli, tmp_path: Path) -> None:
    """Before: ``--config`` on a Latin-1 file died with a UnicodeDecodeError traceback. Now: one
    line naming the line and column of the first byte that is not UTF-8, exit code 2."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes("guild_id: 100000000000000001\ngm_channel: caf\u00e9\n".encode("latin-1"))
    result = cli("runs", "--config", path)
    assert result.code == 2
    line = _only_one_problem_line(result.err, path)
    assert line == "  - line 2, column 16: the file is not UTF-8 text (byte 0xe9); save it as UTF-8"


def test_defect_06_a_config_timestamp_offset_of_24h_or_more_is_one_located_line(
    cli: Cli, tmp_path: Path
) -> None:
    """Before: a YAML timestamp with the offset +25:00 escaped PyYAML as a ValueError from
    ``datetime`` and printed a traceback. Now: one line with its place, exit code 2."""
    path = write_yaml(
        tmp_path / "c.yaml", "tick_interval_seconds: 5\ndefinitions_dir: 2026-12-05T19:00:00+25:00\n"
    )
    result = cli("migrate", "--config", path)
    assert result.code == 2
    line = _only_one_problem_line(result.err, path)
    assert line == "  - line 2, column 18: a time zone offset must be less than 24 hours (e.g. +01:00)"


def test_defect_06_a_config_integer_of_more_than_4300_digits_is_one_located_line(
    cli: Cli, tmp_path: Path
) -> None:
    """Before: ``guild_id:`` followed by 5,000 digits hit Python's int conversion limit inside
    PyYAML and printed a traceback. Now: one located line, exit code 2."""
    path = write_yaml(tmp_path / "c.yaml", "guild_id: " + "7" * 5000 + "\n")
    result = cli("runs", "--config", path)
    assert result.code == 2
    line = _only_one_problem_line(result.err, path)
    assert line == "  - line 1, column 11: a number of more than 4,300 digits is too long to read"


def test_defect_06_the_config_loader_raises_only_config_error_for_each_case(tmp_path: Path) -> None:
    """The same three, through ``wiring.config.load`` as every command calls it."""
    cases = {
        "bytes.yaml": b"guild_id: \xff\n",
        "offset.yaml": b"definitions_dir: 2026-01-01T00:00:00-24:00\n",
        "digits.yaml": b"rehearsal_speed: " + b"1" * 4301 + b"\n",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ConfigError) as caught:
            load(tmp_path / name, {})
        assert len(caught.value.problems) == 1 and caught.value.problems[0].startswith("line 1, column ")


# ── defect 7: tracebacks from a malformed database URL ──────────────────────

BAD_URLS = [
    (
        f"mysql+asyncmy://eventbot:{PASSWORD}@db.example.org:abc/eventbot",
        "the port must be a number from 1 to 65535",
    ),
    (
        f"mysql+asyncmy://eventbot:{PASSWORD}@127.0.0.1:99999/eventbot",
        "the port must be a number from 1 to 65535",
    ),
    (f"mysql+asyncmy://eventbot:{PASSWORD}@127.0.0.1/eventbot?charset=nope", "?charset must be utf8mb4"),
    (f"mysql+asyncmy://eventbot:{PASSWORD}@127.0.0.1/eventbot?foo=bar", "unknown option ?foo"),
    (f"mysql+pymysql://eventbot:{PASSWORD}@127.0.0.1/eventbot", "use the mysql+asyncmy:// driver"),
    ("sqlite:///eventbot.sqlite3", "use the sqlite+aiosqlite:// driver"),
    ("sqlite+aiosqlite:///eventbot.sqlite3?timeout=abc", "a SQLite URL takes no ?options"),
]


@pytest.mark.parametrize(("url", "says"), BAD_URLS)
@pytest.mark.parametrize("command", ["migrate", "runs", "publish", "rehearse"])
def test_defect_07_a_malformed_database_url_is_one_line_and_exit_2(
    cli: Cli, tmp_path: Path, command: str, url: str, says: str
) -> None:
    """Before: these URLs gave a ValueError, OverflowError or TypeError traceback (some only at
    the first connect), exit code 1. Now: one line naming what is wrong, the password hidden,
    exit code 2, and nothing created."""
    event = write_yaml(tmp_path / "event.yaml", definition(announce("announcements", "Hello")))
    extra = [event] if command in ("publish", "rehearse") else []
    result = cli(command, *extra, "--database", url)
    assert result.code == 2, result.err
    assert result.err.startswith("error: --database: database url ") and says in result.err, result.err
    assert len(result.err.splitlines()) == 1, result.err
    assert PASSWORD not in result.err + result.out
    assert not (tmp_path / "eventbot.sqlite3").exists()


@pytest.mark.parametrize(("url", "says"), BAD_URLS)
def test_defect_07_run_refuses_a_malformed_database_url_before_anything_starts(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, url: str, says: str
) -> None:
    """``run`` reads the URL from the config (here EVENTBOT_DATABASE_URL): the config check
    refuses it, naming the key and the variable, before the bot connects to anything."""
    monkeypatch.setenv("DISCORD_TOKEN", "not-a-real-token")
    monkeypatch.setenv("EVENTBOT_DATABASE_URL", url)
    result = cli("run")
    assert result.code == 2
    assert "Traceback" not in result.err
    problems = result.err.splitlines()[1:]
    assert len(problems) == 1 and problems[0].startswith("  - database_url (from EVENTBOT_DATABASE_URL): ")
    assert says in problems[0]
    assert PASSWORD not in result.err + result.out


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite:///eventbot.sqlite3",
        "mysql+asyncmy://u:p@db:3306/eventbot?charset=utf8mb4",
        "mysql+asyncmy://u:p@db/eventbot?connect_timeout=5&read_timeout=30&ssl_check_hostname=false",
        "mysql+asyncmy://u@/eventbot?unix_socket=/run/mysqld/mysqld.sock",
    ],
)
def test_defect_07_good_urls_still_pass_the_check(url: str) -> None:
    assert check_url(url).get_backend_name() in ("sqlite", "mysql")
    create_engine(url).sync_engine.dispose()


@pytest.mark.parametrize(
    "url",
    [
        f"mysql+asyncmy://u:{PASSWORD}@db/x?charset=utf8mb4&charset=latin1",
        f"mysql+asyncmy://u:{PASSWORD}@db/x?ssl_ca=/no/such/ca.pem",
        f"mysql+asyncmy://u:{PASSWORD}@db:0/x",
        f"mysql+asyncmy://u:{PASSWORD}@db/x?connect_timeout=\u0665",
        f"mysql+asyncmy://u:p@ss{PASSWORD}@db:x/x",
        f"postgresql+asyncpg://u:{PASSWORD}@db/x",
        "sqlite+aiosqlite:///a\x00b.sqlite3",
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///:memory:",
        "not a url",
        "",
    ],
)
def test_defect_07_the_url_check_raises_one_error_type_and_hides_the_password(url: str) -> None:
    """The one place every URL is checked (``runner.db.check_url``, which ``create_engine``
    calls): one error type, one line, never the password (even one with an '@' in it)."""
    with pytest.raises(DatabaseUrlError) as caught:
        create_engine(url)
    message = str(caught.value)
    assert message.startswith("database url") and "\n" not in message
    assert PASSWORD not in message


# ── defect 11: config bounds ─────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("EVENTBOT_TICK_INTERVAL_SECONDS", "1e-9", "tick_interval_seconds"),
        ("EVENTBOT_GUILD_ID", "-5", "guild_id"),
        ("EVENTBOT_REHEARSAL_SPEED", "inf", "rehearsal_speed"),
    ],
)
def test_defect_11_out_of_bounds_environment_values_are_refused_naming_the_variable(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, key: str
) -> None:
    """Before: a tick every nanosecond, a negative guild id and an infinite rehearsal speed were
    all accepted. Now each is refused, naming the key and the environment variable."""
    monkeypatch.setenv(variable, value)
    result = cli("migrate")
    assert result.code == 2
    assert f"  - {key} (from {variable}): must be " in result.err, result.err


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("guild_id", 0),
        ("guild_id", 2**64),
        ("guild_id", 1.0e17),
        ("guild_id", True),
        ("guild_id", "\u0661\u0662\u0663"),
        ("guild_id", "12 34"),
        ("tick_interval_seconds", 0.49),
        ("tick_interval_seconds", 300.5),
        ("tick_interval_seconds", float("nan")),
        ("tick_interval_seconds", 10**400),
        ("tick_interval_seconds", False),
        ("rehearsal_speed", 0.99),
        ("rehearsal_speed", 10_001),
        ("rehearsal_speed", float("inf")),
        ("rehearsal_speed", "\u0663"),
    ],
)
def test_defect_11_every_numeric_key_has_a_bound(tmp_path: Path, key: str, value: object) -> None:
    """Ids are snowflakes (positive, below 2**64, ASCII digits, never a float that would round
    them); the tick interval is 0.5 to 300 s; the rehearsal speed is finite, 1 to 10,000."""
    problems = _problems_of(tmp_path, {key: value})
    assert [p.split(":")[0] for p in problems] == [key], problems


@pytest.mark.parametrize(
    ("section", "value"), [("channels", 0), ("channels", -5), ("roles", 2**64), ("roles", "\u00b2")]
)
def test_defect_11_channel_and_role_ids_are_snowflakes(tmp_path: Path, section: str, value: object) -> None:
    problems = _problems_of(tmp_path, {section: {"news": value}})
    assert len(problems) == 1 and problems[0].startswith(f"{section}.news: must be a Discord id"), problems


@pytest.mark.parametrize("alias", ["123", "#news", "two words", ""])
def test_defect_11_an_alias_a_definition_could_not_name_is_refused(tmp_path: Path, alias: str) -> None:
    """An all-digit alias would be read as a raw id, "#news" as the alias "news"."""
    problems = _problems_of(tmp_path, {"channels": {alias: 100000000000000101}})
    assert len(problems) == 1 and problems[0].startswith("channels.") and "(the alias)" in problems[0]


def test_defect_11_the_edges_of_every_bound_are_accepted(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "c.yaml",
        {
            "guild_id": "18446744073709551615",
            "channels": {"news": 1},
            "tick_interval_seconds": 0.5,
            "rehearsal_speed": 10_000,
        },
    )
    config = load(path, {})
    assert config.guild_id == 2**64 - 1 and config.channels == {"news": 1}
    assert config.tick_interval_seconds == 0.5 and config.rehearsal_speed == 10_000.0
    upper = load(None, {"EVENTBOT_TICK_INTERVAL_SECONDS": "300", "EVENTBOT_REHEARSAL_SPEED": "1"})
    assert upper.tick_interval_seconds == 300.0 and upper.rehearsal_speed == 1.0


def test_defect_11_the_example_config_documents_every_bound() -> None:
    text = EXAMPLE_CONFIG.read_text()
    for bound in ("0.5", "300", "10000", "2**64"):
        assert bound in text, f"config.example.yaml does not give the bound {bound}"


def _problems_of(tmp_path: Path, data: dict[str, object]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(write_yaml(tmp_path / "c.yaml", data), {})
    return caught.value.problems


# ── found by the config fuzz (tests/reliability/test_bad_config.py) ──────────


def test_fuzz_found_a_long_value_is_checked_for_secrets_in_linear_time(tmp_path: Path) -> None:
    """Before: the token pattern was tried from every position of a long run of letters, so a
    refused config holding a 5,000-character value took 50 ms to redact, and a 100,000-character
    one minutes. Now a pattern starts only where a run starts."""
    path = write_yaml(tmp_path / "c.yaml", {"gm_channel": "x" * 200_000})
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load(path, {})
    assert time.perf_counter() - started < 2
    assert caught.value.problems == [
        "gm_channel: '<a value that looks like a secret, not shown>' is not one of the channel aliases in 'channels'"
    ]


def test_fuzz_found_a_key_that_is_not_text_is_named_as_written(tmp_path: Path) -> None:
    """Before: ``true: 1`` was reported as "1: unknown key" (pydantic's name for True). Now the
    key is named as the file has it."""
    path = write_yaml(tmp_path / "c.yaml", "true: 1\n12: x\n")
    with pytest.raises(ConfigError) as caught:
        load(path, {})
    assert caught.value.problems == ["True: unknown key", "12: unknown key"]
