"""``run`` and ``sync``: the Discord bot, started or registered (both need ``DISCORD_TOKEN``).

``run`` is a service: it waits for Discord and the database rather than dying at the first
refused connection (``bot.startup``), and SIGTERM or Ctrl-C stop it the way a clean shutdown
should, the bot closed and its runs given back, with exit code 0. ``sync`` is a one-off: it
tries once and says in one line why it did not work."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from cli.common import EXIT_FAILED, EXIT_OK, CommandFailed, UsageError, check_sqlite_location, load_config
from wiring import config as config_module

T = TypeVar("T")
log = logging.getLogger(__name__)

# The signals that ask a service to stop: the terminal's Ctrl-C and what systemd, Docker and
# kill send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
    from bot.startup import Unreachable, use_api_base_from_env

    use_api_base_from_env()
    try:
        return asyncio.run(coroutine)
    except (StartupError, Unreachable) as exc:  # one line, written never to contain the token
        raise CommandFailed(str(exc)) from None


async def until_stopped(work: Coroutine[Any, Any, None]) -> str | None:
    """Await ``work`` until it ends or a stop signal arrives; answer the signal's name, or
    ``None`` if ``work`` ended by itself. On a signal ``work`` is cancelled, so its ``finally``
    blocks (the bot's close) run before this returns. A second signal cancels that too."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    received: list[str] = []

    def stop(sig: signal.Signals) -> None:
        if not received:
            log.info("%s received: stopping (runs keep their state and are given back)", sig.name)
        received.append(sig.name)
        task.cancel()

    installed = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, stop, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # Windows' loops, or not the main thread
            pass
    try:
        await task
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    return received[0] if received else None


def cmd_run(args: argparse.Namespace) -> int:
    token = _token_or_explain()
    if token is None:
        return EXIT_FAILED
    config = load_config(args.config)
    # A SQLite file in a directory that does not exist will not appear by waiting.
    check_sqlite_location(config.database_url)
    if args.retry_cap < args.retry_first:
        raise UsageError("--retry-cap must be at least --retry-first")
    from bot.serving import run_bot
    from bot.startup import Retry

    stopped = _on_discord(until_stopped(run_bot(config, token, Retry(args.retry_first, args.retry_cap))))
    if stopped is not None:
        log.info("stopped on %s", stopped)
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    token = _token_or_explain()
    if token is None:
        return EXIT_FAILED
    config = load_config(args.config)
    guild_id = None if args.everywhere else (args.guild or config.guild_id)
    if guild_id is None and not args.everywhere:
        # Registering everywhere takes Discord up to an hour and reaches every server the bot is
        # in: a choice to make, not what a missing guild_id should quietly mean.
        raise UsageError(
            "no guild to register the commands in: pass --guild ID or set guild_id in the config "
            "(or --global for every server the bot is in; Discord can take up to an hour to show them)"
        )
    from bot.serving import sync_commands

    names = _on_discord(sync_commands(config, token, guild_id))
    commands = ", ".join(f"/{name}" for name in names or []) or "no commands"
    if guild_id is None:
        print(f"synced {commands} globally (Discord can take up to an hour to show them everywhere)")
    else:
        print(f"synced {commands} to guild {guild_id}")
    return EXIT_OK
