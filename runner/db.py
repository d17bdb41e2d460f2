"""The one engine factory every process uses: the bot, the CLI, the rehearsal and the tests.

Backend differences live here and in ``insert_ignore``, not in the statements:

* **SQLite** (the embedded default) is made a real store: WAL, a busy timeout, foreign keys on,
  and ``BEGIN IMMEDIATE`` for every transaction so two writers queue on the lock instead of one
  of them failing at its first write with SQLITE_BUSY. One pooled connection per process: SQLite
  has a single writer anyway, and one connection keeps the order of writes obvious. Statements
  run on the event loop's thread, not aiosqlite's, and a lock held by another connection is
  waited for with async sleeps, up to the busy timeout (``runner.sqlite_inline``).
* **MariaDB** through asyncmy. SQLAlchemy's MySQL dialects connect with ``CLIENT_FOUND_ROWS``,
  so ``rowcount`` counts *matched* rows, not changed ones (the seeds' ``foundRows`` lesson). No
  flag here changes that; instead every compare-and-set in ``runner/sql`` moves the column it
  guards on, so a loser matches nothing and is told 0. READ COMMITTED keeps InnoDB from taking
  gap locks that two runners would deadlock on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import sqlalchemy as sa
import tenacity
from sqlalchemy import event
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from runner import backoff, sqlite_inline
from runner.redaction import masked_url

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_URL = "sqlite+aiosqlite:///eventbot.sqlite3"
SQLITE_BUSY_TIMEOUT_MS = 10_000


def is_sqlite(engine_or_url: AsyncEngine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, AsyncEngine) else make_url(engine_or_url)
    return url.get_backend_name() == "sqlite"


class DatabaseUrlError(ValueError):
    """A database URL eventbot cannot use; the message says what is wrong, never the password."""


SQLITE_DRIVER = "aiosqlite"
MARIADB_DRIVER = "asyncmy"
# The query options a MariaDB URL may carry, each with the check its value must pass. Anything
# else is refused here, by name: the dialect would pass it to asyncmy.connect, which fails only
# at the first connect (``?foo=bar`` is a TypeError, ``?charset=nope`` an error from deep in the
# driver). ``client_flag`` is left out on purpose: the compare-and-sets rely on CLIENT_FOUND_ROWS.
_TEXT = "a non-empty value"
_SECONDS = "a whole number of seconds from 1 to 3600"
_BOOLEAN = "true or false"
# The TLS files are opened at the first connect, where a missing one is a bare FileNotFoundError.
_FILE = "the path of a file that exists"
_DIRECTORY = "the path of a directory that exists"
MARIADB_OPTIONS = {
    # Event text is full of emoji, which only utf8mb4 can store.
    "charset": "utf8mb4",
    "unix_socket": _TEXT,
    "connect_timeout": _SECONDS,
    "read_timeout": _SECONDS,
    "ssl_ca": _FILE,
    "ssl_cert": _FILE,
    "ssl_key": _FILE,
    "ssl_capath": _DIRECTORY,
    "ssl_cipher": _TEXT,
    "ssl_check_hostname": _BOOLEAN,
}
MAX_PORT = 65535


def _option_problem(name: str, value: object) -> str | None:
    expected = MARIADB_OPTIONS.get(name)
    if expected is None:
        return f"unknown option ?{name} (eventbot accepts {', '.join(sorted(MARIADB_OPTIONS))})"
    if not isinstance(value, str):
        return f"?{name} is given more than once"
    if expected == _TEXT:
        return None if value.strip() else f"?{name} must be {_TEXT}"
    if expected == _FILE:
        return None if value.strip() and os.path.isfile(value) else f"?{name} must be {_FILE}"
    if expected == _DIRECTORY:
        return None if value.strip() and os.path.isdir(value) else f"?{name} must be {_DIRECTORY}"
    if expected == _SECONDS:
        ok = value.isascii() and value.isdigit() and 1 <= int(value) <= 3600
        return None if ok else f"?{name} must be {_SECONDS}"
    if expected == _BOOLEAN:
        return None if value.lower() in ("true", "false") else f"?{name} must be {_BOOLEAN}"
    if value.lower() != expected:
        return f"?{name} must be {expected}: event text is full of emoji, which only {expected} can store"
    return None


def check_url(url: str) -> sa.engine.URL:
    """The parsed ``url`` if eventbot can use it, else ``DatabaseUrlError`` saying why.

    Every check that would otherwise fail only at the first connect (or as a bare Python error
    from the URL parser) is made here, once, for every command and the bot alike."""
    shown = masked_url(url) if isinstance(url, str) else "<not text>"
    where = f"database url {shown!r}"
    if not isinstance(url, str) or not url.strip():
        raise DatabaseUrlError("database url: empty (e.g. sqlite+aiosqlite:///eventbot.sqlite3)")
    if "\x00" in url:
        raise DatabaseUrlError(f"{where}: contains a NUL character")
    try:
        parsed = make_url(url)
    except ValueError:
        # The parser turns the port into an int itself, and says nothing more useful than that.
        raise DatabaseUrlError(f"{where}: the port must be a number from 1 to {MAX_PORT}") from None
    except sa.exc.ArgumentError:
        raise DatabaseUrlError(
            f"{where}: not a database URL (e.g. sqlite+aiosqlite:///eventbot.sqlite3 or "
            "mysql+asyncmy://user:pass@host:3306/db)"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "mysql", "mariadb"):
        # Before asking for the driver: with none given, SQLAlchemy imports the backend's dialect
        # to find its default, and an unknown backend raises NoSuchModuleError.
        raise DatabaseUrlError(
            f"{where}: unsupported backend {backend!r} (use sqlite+{SQLITE_DRIVER} or mysql+{MARIADB_DRIVER})"
        )
    driver = parsed.get_driver_name()
    if backend == "sqlite":
        if driver != SQLITE_DRIVER:
            raise DatabaseUrlError(f"{where}: use the sqlite+{SQLITE_DRIVER}:// driver")
        if parsed.username or parsed.password or parsed.host or parsed.port:
            raise DatabaseUrlError(
                f"{where}: a SQLite URL names a file only (sqlite+{SQLITE_DRIVER}:///path/to/file.sqlite3)"
            )
        if not parsed.database or parsed.database == ":memory:" or "mode=memory" in parsed.database:
            # Each command and the bot are processes of their own: a database in memory would
            # vanish with the command that made it (and the engine's pool cannot hold one).
            raise DatabaseUrlError(f"{where}: name a database file; one in memory vanishes with the command")
        if parsed.query:
            # The connect listener sets SQLite's options; the dialect ignores the rest with a warning.
            raise DatabaseUrlError(f"{where}: a SQLite URL takes no ?options")
        return parsed
    if backend in ("mysql", "mariadb"):
        if driver != MARIADB_DRIVER:
            raise DatabaseUrlError(f"{where}: use the mysql+{MARIADB_DRIVER}:// driver")
        if parsed.port is not None and not 1 <= parsed.port <= MAX_PORT:
            raise DatabaseUrlError(f"{where}: the port must be a number from 1 to {MAX_PORT}")
        for name, value in parsed.query.items():
            problem = _option_problem(name, value)
            if problem:
                raise DatabaseUrlError(f"{where}: {problem}")
    return parsed


def create_engine(url: str = DEFAULT_URL, **overrides: Any) -> AsyncEngine:
    """Build the async engine for ``url`` with the settings production uses; a URL that
    ``check_url`` refuses raises ``DatabaseUrlError`` (a ``ValueError``)."""
    parsed = check_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, **overrides)
    options: dict[str, Any] = {
        "pool_pre_ping": True,
        "pool_recycle": 1800,
        "pool_size": 10,
        "max_overflow": 10,
        "isolation_level": "READ COMMITTED",
    }
    options.update(overrides)
    engine = create_async_engine(url, **options)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        # Read once per connection, outside any transaction a caller counts or times.
        cursor = dbapi_connection.cursor()
        cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
        row = cursor.fetchone()
        cursor.close()
        record.info[_GALERA] = row is not None and str(row[1]).upper() == "ON"

    return engine


def _sqlite_engine(url: str, **overrides: Any) -> AsyncEngine:
    database = make_url(url).database
    assert database is not None  # check_url refuses a URL without a file

    async def connect() -> Any:
        return await sqlite_inline.connect(database, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS)

    options: dict[str, Any] = {
        "pool_size": 1,
        "max_overflow": 0,
        "pool_timeout": 60,
        # Statements run on the loop's thread; lock waits are async sleeps (``runner.sqlite_inline``).
        "async_creator": connect,
    }
    options.update(overrides)
    engine = create_async_engine(url, **options)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module so "begin" below decides.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
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


# What "the database cannot be reached" looks like, everywhere it is caught (the loop, the engine,
# the error boundary, the CLI). OperationalError and InterfaceError are what the drivers raise for
# a refused, dropped or timed-out connection (asyncmy 2003/2013, aiosqlite "unable to open");
# DisconnectionError is the pool's own, when a checked-out connection turns out dead; OSError is
# everything the drivers raise unwrapped from their own sockets and TLS files (ConnectionError,
# TimeoutError and ssl.SSLError are all OSErrors, so they need no entry of their own).
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    sa.exc.DisconnectionError,
    OSError,
)


# MariaDB: 1213 deadlock, 1205 lock wait timeout. Both roll the statement (1213: the whole
# transaction) back and ask for the transaction to be tried again.
_CONFLICT_CODES = {1205, 1213}
CONFLICT_ATTEMPTS = 5
# From 2-20 ms on the first retry to 16-160 ms on the last: long enough for the winner of the
# lock to commit, short enough that a tick hardly notices.
CONFLICT_BACKOFF_FIRST, CONFLICT_BACKOFF_JITTER = 0.02, 0.9
# The cap is the last retry's own doubled wait: it bounds the sum, never shortens a retry.
CONFLICT_BACKOFF_CAP = backoff.delay(CONFLICT_ATTEMPTS - 2, first=CONFLICT_BACKOFF_FIRST, cap=math.inf)


class ConflictCounts:
    """How many lock and certification conflicts this process's transactions met: ``retried``
    ran again, ``gave_up`` ran out of attempts and raised. On Galera every 1213 raised at COMMIT
    lands here, which is how the tests and the bench report the conflicts a cluster cost."""

    def __init__(self) -> None:
        self.retried = 0
        self.gave_up = 0

    def as_dict(self) -> dict[str, int]:
        return {"conflicts_retried": self.retried, "conflicts_gave_up": self.gave_up}


CONFLICTS = ConflictCounts()


def is_conflict(exc: BaseException) -> bool:
    """A transaction lost a lock conflict and may simply be run again."""
    original = getattr(exc, "orig", None)
    args = getattr(original, "args", ())
    if args and args[0] in _CONFLICT_CODES:
        return True
    return "database is locked" in str(original or exc).lower()


def _lost_conflict(exc: BaseException) -> bool:
    return isinstance(exc, sa.exc.OperationalError) and is_conflict(exc)


def _conflict_wait(state: tenacity.RetryCallState) -> float:
    # tenacity counts attempts from 1; the one backoff counts retries from 0.
    return backoff.delay(
        state.attempt_number - 1,
        first=CONFLICT_BACKOFF_FIRST,
        cap=CONFLICT_BACKOFF_CAP,
        jitter=CONFLICT_BACKOFF_JITTER,
    )


def _count_retry(state: tenacity.RetryCallState) -> None:
    CONFLICTS.retried += 1


def _give_up(state: tenacity.RetryCallState) -> Any:
    CONFLICTS.gave_up += 1
    assert state.outcome is not None
    # Raises the last attempt's own conflict, not tenacity's RetryError.
    return state.outcome.result()


def retry_on_conflict(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Run a method that holds exactly one transaction again when it loses a lock conflict.

    Two runners on one MariaDB will now and then deadlock on the same index range; InnoDB
    rolls one back and says "try restarting transaction". On Galera the same 1213 comes from
    COMMIT itself when another node's write to the same row was certified first, after every
    statement had already reported its rows: the rolled-back attempt's answer is thrown away with
    it, and only the attempt whose COMMIT returned speaks. Only methods whose every effect is
    inside that one transaction may wear this. Any other error is raised at once."""
    retrying = tenacity.retry(
        retry=tenacity.retry_if_exception(_lost_conflict),
        stop=tenacity.stop_after_attempt(CONFLICT_ATTEMPTS),
        wait=_conflict_wait,
        before_sleep=_count_retry,
        retry_error_callback=_give_up,
    )
    return retrying(method)


_GALERA = "eventbot_galera"


def on_galera(conn: AsyncConnection) -> bool:
    """Whether ``conn`` is to a node of a Galera cluster: a MariaDB with ``wsrep_on`` ON (read when
    ``create_engine``'s pool opened the connection). A server without Galera has no such
    variable, or has it OFF; SQLite is never one."""
    return bool(conn.info.get(_GALERA, False))
