"""``run`` and ``sync``: the token comes only from DISCORD_TOKEN and is never printed.

``bot.serving`` (the Discord front end) is replaced by a stand-in module, so these tests pin the
command line's side of the contract: ``run_bot(config, token)`` and
``sync_commands(config, token, guild_id)``.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli, write_yaml
from wiring.config import Config

TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.fake.token-never-printed"


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """A stand-in ``bot.serving`` recording what it was called with."""
    calls: list[tuple[str, Any]] = []
    module = types.ModuleType("bot.serving")

    async def run_bot(config: Config, token: str, retry: Any = None) -> None:
        calls.append(("run", (config, token)))

    async def sync_commands(config: Config, token: str, guild_id: int | None) -> list[str]:
        calls.append(("sync", (config, token, guild_id)))
        return ["event"]

    module.run_bot = run_bot  # type: ignore[attr-defined]
    module.sync_commands = sync_commands  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bot.serving", module)
    return calls


@pytest.mark.parametrize("command", ["run", "sync"])
@pytest.mark.parametrize("value", [None, "", "   "])
def test_without_a_token_the_command_says_so_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, app: list[Any], command: str, value: str | None
) -> None:
    if value is not None:
        monkeypatch.setenv("DISCORD_TOKEN", value)
    result = cli(command)
    assert result.code == 1
    assert result.out == ""
    assert len(result.err.splitlines()) == 1
    assert result.err.startswith("DISCORD_TOKEN is not set: ")
    assert app == [], "nothing may start without a token"


def test_run_hands_the_token_and_the_config_to_the_bot_and_never_prints_the_token(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, app: list[Any], tmp_path: Path
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", f"  {TOKEN}\n")
    config = write_yaml(tmp_path / "bot.yaml", {"guild_id": 100000000000000001, "tick_interval_seconds": 2})
    result = cli("run", "--config", config, "-v")
    assert result.code == 0
    [(kind, (given, token))] = app
    assert kind == "run" and token == TOKEN
    assert given.guild_id == 100000000000000001 and given.tick_interval_seconds == 2
    assert TOKEN not in result.out + result.err


def test_a_token_in_the_config_file_is_refused(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, app: list[Any], tmp_path: Path
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    config = write_yaml(tmp_path / "bot.yaml", {"token": "pasted-here-by-mistake"})
    result = cli("run", "--config", config)
    assert result.code == 2
    assert "token: never put the bot token in a file; set DISCORD_TOKEN in the environment" in result.err
    assert "pasted-here-by-mistake" not in result.err + result.out
    assert app == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([], 100000000000000001),  # the config's guild_id
        (["--guild", "200000000000000002"], 200000000000000002),
        (["--global"], None),
    ],
)
def test_sync_registers_in_the_chosen_guild(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    app: list[Any],
    tmp_path: Path,
    arguments: list[str],
    expected: int | None,
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    write_yaml(tmp_path / "config.yaml", {"guild_id": 100000000000000001})
    result = cli("sync", *arguments)
    assert result.code == 0
    [(kind, (_, token, guild_id))] = app
    assert (kind, token, guild_id) == ("sync", TOKEN, expected)
    assert result.out.startswith(
        "synced /event " + ("globally" if expected is None else f"to guild {expected}")
    )
    assert TOKEN not in result.out + result.err


@pytest.mark.parametrize("command", ["run", "sync"])
def test_a_bot_that_cannot_start_says_why_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, app: list[Any], command: str
) -> None:
    """``bot.serving`` raises ``StartupError`` (a bad token, a database behind the code): one line on
    stderr and exit 1, not a traceback."""
    from bot.errors import StartupError

    async def refuse(*_: Any) -> None:
        raise StartupError("Discord refused the token in DISCORD_TOKEN (it is not a valid bot token)")

    monkeypatch.setattr(
        sys.modules["bot.serving"], "run_bot" if command == "run" else "sync_commands", refuse
    )
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    result = cli(command, *(["--global"] if command == "sync" else []))
    assert result.code == 1
    assert result.err == "error: Discord refused the token in DISCORD_TOKEN (it is not a valid bot token)\n"
    assert TOKEN not in result.out + result.err


def test_sync_refuses_a_guild_and_global_together(cli: Cli, app: list[Any]) -> None:
    result = cli("sync", "--guild", "200000000000000002", "--global")
    assert result.code == 2
    assert "not allowed with argument" in result.err
