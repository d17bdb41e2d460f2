"""``run`` and ``sync``: the Discord bot, started or registered (both need ``DISCORD_TOKEN``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from cli.common import EXIT_FAILED, EXIT_OK, CommandFailed, load_config
from wiring import config as config_module

T = TypeVar("T")


def _token_or_explain() -> str | None:
    token = config_module.token_from_env()
    if token is None:
        print(
            f"{config_module.TOKEN_ENV} is not set: export the bot token from the Discord developer "
            f"portal as {config_module.TOKEN_ENV} (it is never read from the config file)",
            file=sys.stderr,
        )
    return token


def _on_discord(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a bot coroutine; a refused start-up is one line for the user, not a traceback."""
    from bot.errors import StartupError

    try:
        return asyncio.run(coroutine)
    except StartupError as exc:  # one line, written never to contain the token
        raise CommandFailed(str(exc)) from None


def cmd_run(args: argparse.Namespace) -> int:
    token = _token_or_explain()
    if token is None:
        return EXIT_FAILED
    config = load_config(args.config)
    from bot.app import run_bot

    _on_discord(run_bot(config, token))
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    token = _token_or_explain()
    if token is None:
        return EXIT_FAILED
    config = load_config(args.config)
    guild_id = None if args.everywhere else (args.guild or config.guild_id)
    from bot.app import sync_commands

    names = _on_discord(sync_commands(config, token, guild_id))
    commands = ", ".join(f"/{name}" for name in names or []) or "no commands"
    if guild_id is None:
        print(f"synced {commands} globally (Discord can take up to an hour to show them everywhere)")
    else:
        print(f"synced {commands} to guild {guild_id}")
    return EXIT_OK
