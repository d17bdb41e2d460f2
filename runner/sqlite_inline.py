"""SQLite for the async engine, run on the event loop's own thread.

aiosqlite runs every call on its sqlite3 connection in a thread of its own, and SQLAlchemy's
adapter makes four such calls per statement (open a cursor, execute, fetch, close), plus one for
each BEGIN and COMMIT: for a short transaction, a dozen hops between the event loop and that
thread, each a queue put, a thread wake-up and a self-pipe write back. Measured here, a hop cost
0.2-0.4 ms, several times what SQLite takes for the indexed statements the runner sends.

So this module gives SQLAlchemy's aiosqlite adapter a connection with aiosqlite's interface
whose work is done in place, synchronously: WAL SQLite answers the runner's statements in tens
of microseconds, less than a hop. The one thing that could block the loop is waiting for
another connection's write lock, so SQLite never waits (``timeout=0``): a statement that starts
a transaction (``BEGIN IMMEDIATE``, where every transaction here takes the write lock) and finds
the database locked is tried again after an ``asyncio.sleep``, the loop free meanwhile, for up
to ``busy_timeout_ms``; inside a transaction a lock error is raised as it is (``retry_on_conflict``
runs the transaction again). Transactions, locking and durability are SQLite's, unchanged.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from runner import backoff

FIRST_RETRY_SECONDS = 0.001
LONGEST_RETRY_SECONDS = 0.05


def _locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


class InlineCursor:
    """What SQLAlchemy's aiosqlite adapter needs of a cursor; each execute does the whole
    statement (execute, fetch every row, rowcount, lastrowid, close) at once."""

    arraysize = 1

    def __init__(self, connection: InlineConnection) -> None:
        self._connection = connection
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self._rows: list[Any] = []

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> InlineCursor:
        def run(cursor: sqlite3.Cursor) -> None:
            cursor.execute(sql, parameters)
            self._rows = cursor.fetchall() if cursor.description else []

        await self._connection.run(run, self)
        return self

    async def executemany(self, sql: str, parameters: Sequence[Any]) -> InlineCursor:
        def run(cursor: sqlite3.Cursor) -> None:
            cursor.executemany(sql, parameters)
            self._rows = []

        await self._connection.run(run, self)
        return self

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        count = self.arraysize if size is None else size
        rows, self._rows = self._rows[:count], self._rows[count:]
        return rows

    async def close(self) -> None:
        self._rows = []


class _AtOnce:
    """Stands in for aiosqlite's work queue, which SQLAlchemy's adapter posts to directly to set
    the isolation level: the work is done as it is posted."""

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, work = item
        try:
            future.set_result(work())
        except Exception as exc:
            future.set_exception(exc)


class InlineConnection:
    """The part of ``aiosqlite.Connection`` SQLAlchemy's adapter uses, done in place."""

    def __init__(self, connection: sqlite3.Connection, busy_timeout_ms: int) -> None:
        self._connection: sqlite3.Connection | None = connection
        self._tx = _AtOnce()
        self._busy_timeout = busy_timeout_ms / 1000

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection

    async def run(self, work: Callable[[sqlite3.Cursor], None], into: InlineCursor) -> None:
        """Do ``work`` on a fresh cursor, and copy what SQLAlchemy reads into ``into``. A lock
        held elsewhere, met by a statement that starts a transaction, is waited for here."""
        raw = self._conn
        deadline = time.monotonic() + self._busy_timeout
        retries = 0
        while True:
            starting = not raw.in_transaction
            cursor = raw.cursor()
            try:
                work(cursor)
                into.description, into.rowcount, into.lastrowid = (
                    cursor.description,
                    cursor.rowcount,
                    cursor.lastrowid,
                )
                return
            except sqlite3.OperationalError as exc:
                if not (starting and _locked(exc)) or time.monotonic() >= deadline:
                    raise
            finally:
                cursor.close()
            await asyncio.sleep(backoff.delay(retries, first=FIRST_RETRY_SECONDS, cap=LONGEST_RETRY_SECONDS))
            retries += 1

    def cursor(self) -> InlineCursor:
        return InlineCursor(self)

    async def commit(self) -> None:
        self._conn.commit()

    async def rollback(self) -> None:
        self._conn.rollback()

    async def close(self) -> None:
        self.stop()

    def stop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: Any) -> None:
        self._conn.isolation_level = value


async def connect(database: str, *, busy_timeout_ms: int) -> InlineConnection:
    """For ``create_async_engine(async_creator=...)``. SQLite itself never waits for a lock
    (``timeout=0``); ``InlineConnection.run`` waits, without blocking the loop."""
    # check_same_thread=False: the pool may close a connection from another thread (at exit).
    raw = sqlite3.connect(database, timeout=0, check_same_thread=False)
    return InlineConnection(raw, busy_timeout_ms)
