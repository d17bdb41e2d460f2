"""What every command shares: the exit codes, the two errors ``main`` turns into them, and
reading the config and opening the database."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from cli import logs
from runner.db import DATABASE_ERRORS, DatabaseUrlError, check_url, create_engine
from runner.history import Actor
from runner.migrate import current_revision
from runner.redaction import masked_url, password_of
from wiring import config as config_module
from wiring.config import Config

DEFAULT_CONFIG = "config.yaml"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
CLI_ACTOR = Actor(None, "cli")

T = TypeVar("T")


class CommandFailed(Exception):
    """The command could not do what was asked; the message says why, in one line."""


class UsageError(Exception):
    """An argument the command cannot use (exit code 2); the message says why, in one line."""


# ── Shared helpers ──────────────────────────────────────────────────────────


def config_path(path: str | None) -> str | None:
    """The config file ``load_config`` reads: ``--config PATH``, else ``config.yaml`` in the
    working directory if there is one; None for the built-in defaults."""
    if path is None and Path(DEFAULT_CONFIG).is_file():
        return DEFAULT_CONFIG
    return path


def load_config(path: str | None) -> Config:
    """``--config PATH``, else ``config.yaml`` in the working directory if there is one, else
    the built-in defaults. ``EVENTBOT_*`` environment variables override either."""
    config = config_module.load(config_path(path))
    logs.keep_secret(password_of(config.database_url))
    # The game targets' secrets, in the variables the config names: hidden as the database
    # password is, should a library's error or a debug line ever carry one.
    named = [t.secret_env for t in config.webhooks.values()] + [s.password_env for s in config.rcon.values()]
    for name in named:
        logs.keep_secret(os.environ.get(name) if name else None)
    return config


def shown_url(url: str) -> str:
    """A database URL fit to print: the password is never shown."""
    return masked_url(url)


def checked_database(url: str, origin: str = "--database") -> str:
    """``url`` if ``runner.db.check_url`` accepts it, else ``UsageError``: one line, naming
    where the URL came from and what is wrong with it, the password hidden."""
    logs.keep_secret(password_of(url))
    try:
        check_url(url)
    except DatabaseUrlError as exc:
        raise UsageError(f"{origin}: {config_module.redact(str(exc))}") from None
    return url


def _engine_for(url: str) -> AsyncEngine:
    return create_engine(checked_database(url, "database url"))


async def on_database(url: str, work: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``work`` with an engine for ``url`` and always dispose of it; connection failures
    become one readable line rather than a traceback."""
    check_sqlite_location(url)
    engine = _engine_for(url)
    try:
        return await work(engine)
    except DATABASE_ERRORS as exc:
        # aiosqlite stops its worker thread after a failed connect without waiting for it; let
        # the thread report back before asyncio.run closes this loop under it. (OSError: the
        # driver opens TLS files and sockets itself, e.g. an ssl_cipher OpenSSL refuses.)
        await asyncio.sleep(0.1)
        reason = getattr(exc, "orig", None) or exc
        raise CommandFailed(f"cannot use the database at {shown_url(url)}: {reason}") from None
    finally:
        await engine.dispose()


def check_sqlite_location(url: str, *, must_exist: bool = False) -> None:
    """Refuse a SQLite path that cannot work before connecting: a missing directory (SQLite
    would fail with "unable to open database file"), or, when reading, a missing file (SQLite
    would create an empty one)."""
    parsed = check_url(checked_database(url, "database url"))
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return
    path = Path(parsed.database)
    if must_exist and not path.exists():
        raise CommandFailed(
            f"no database at {path}: run `python -m bot migrate` first "
            "(or pass --database / set EVENTBOT_DATABASE_URL)"
        )
    if not path.parent.is_dir():
        raise CommandFailed(
            f"cannot use the database at {shown_url(url)}: the directory {path.parent} does not exist"
        )


async def require_schema(engine: AsyncEngine, url: str) -> None:
    if await current_revision(engine) is None:
        raise CommandFailed(
            f"the database at {shown_url(url)} has no eventbot tables yet: run `python -m bot migrate` first"
        )


def database_url(args: argparse.Namespace, config: Config) -> str:
    """``--database``, checked here; else ``database_url``, which the config check has checked."""
    if args.database is not None:
        return checked_database(args.database)
    return config.database_url


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
