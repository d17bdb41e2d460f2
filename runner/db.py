"""The one engine factory every process uses: the bot, the CLI, the rehearsal and the tests.

Backend differences live here and in ``insert_ignore``, not in the statements:

* **SQLite** (the embedded default) is made a real store: WAL, a busy timeout, foreign keys on,
  and ``BEGIN IMMEDIATE`` for every transaction so two writers queue on the lock instead of one
  of them failing at its first write with SQLITE_BUSY. One pooled connection per process: SQLite
  has a single writer anyway, and one connection keeps the order of writes obvious.
* **MariaDB** through asyncmy. SQLAlchemy's MySQL dialects connect with ``CLIENT_FOUND_ROWS``,
  so ``rowcount`` counts *matched* rows, not changed ones (the seeds' ``foundRows`` lesson). No
  flag here changes that; instead every compare-and-set in ``runner/sql`` moves the column it
  guards on, so a loser matches nothing and is told 0. READ COMMITTED keeps InnoDB from taking
  gap locks that two runners would deadlock on.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_URL = "sqlite+aiosqlite:///eventbot.sqlite3"
SQLITE_BUSY_TIMEOUT_MS = 10_000


def is_sqlite(engine_or_url: AsyncEngine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, AsyncEngine) else make_url(engine_or_url)
    return url.get_backend_name() == "sqlite"


def create_engine(url: str = DEFAULT_URL, **overrides: Any) -> AsyncEngine:
    """Build the async engine for ``url`` with the settings production uses."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, **overrides)
    if backend in ("mysql", "mariadb"):
        if parsed.get_driver_name() != "asyncmy":
            raise ValueError(f"database url {parsed.render_as_string()!r}: use the mysql+asyncmy:// driver")
        options: dict[str, Any] = {
            "pool_pre_ping": True,
            "pool_recycle": 1800,
            "pool_size": 10,
            "max_overflow": 10,
            "isolation_level": "READ COMMITTED",
        }
        options.update(overrides)
        return create_async_engine(url, **options)
    raise ValueError(f"database url: unsupported backend {backend!r} (use sqlite+aiosqlite or mysql+asyncmy)")


def _sqlite_engine(url: str, **overrides: Any) -> AsyncEngine:
    options: dict[str, Any] = {"pool_size": 1, "max_overflow": 0, "pool_timeout": 60}
    options.update(overrides)
    engine = create_async_engine(url, **options)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module so "begin" below decides.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def insert_ignore(connection: sa.engine.Connection | Any, table: sa.Table) -> Any:
    """``INSERT`` that does nothing when a unique key already holds the row.

    MariaDB's ``INSERT IGNORE`` answers 0 rows for a duplicate rather than raising 1062, which
    is what makes "materialise this occurrence / phase again" a safe no-op.
    """
    if connection.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    return mysql.insert(table).prefix_with("IGNORE")


# MariaDB: 1213 deadlock, 1205 lock wait timeout. Both roll the statement (1213: the whole
# transaction) back and ask for the transaction to be tried again.
_CONFLICT_CODES = {1205, 1213}
CONFLICT_ATTEMPTS = 5


def is_conflict(exc: BaseException) -> bool:
    """A transaction lost a lock conflict and may simply be run again."""
    original = getattr(exc, "orig", None)
    args = getattr(original, "args", ())
    if args and args[0] in _CONFLICT_CODES:
        return True
    return "database is locked" in str(original or exc).lower()


def retry_on_conflict(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Run a method that holds exactly one transaction again when it loses a lock conflict.

    Two runners on one MariaDB will now and then deadlock on the same index range; InnoDB
    rolls one back and says "try restarting transaction". Only methods whose every effect is
    inside that one transaction may wear this."""

    @functools.wraps(method)
    async def again(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                return await method(*args, **kwargs)
            except sa.exc.OperationalError as exc:
                if not is_conflict(exc) or attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(random.uniform(0.002, 0.02) * 2**attempt)
        raise AssertionError("unreachable")

    return again
