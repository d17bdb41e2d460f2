"""aiosqlite with one trip to its thread per statement.

aiosqlite runs every call on the sqlite3 connection in a thread of its own, and SQLAlchemy's
adapter makes four calls per statement (open a cursor, execute, fetch, close): four hops
between the event loop and that thread, each a queue put, a thread wake-up and a self-pipe write
back. On a busy two-core machine the hops, not SQLite, were most of a short transaction's time.
``OneTripConnection`` is the same aiosqlite connection (same thread, same sqlite3 connection,
same queue) whose cursor does a statement's whole work (execute, fetch every row, read rowcount
and lastrowid, close) in one call on that thread; what SQLAlchemy then asks of the cursor is
answered from memory. Transactions, locking and durability are SQLite's, unchanged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")


class OneTripCursor:
    """What SQLAlchemy's aiosqlite adapter needs of a cursor, one thread trip per execute."""

    arraysize = 1

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self._rows: list[Any] = []

    async def __aenter__(self) -> OneTripCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> OneTripCursor:
        raw = self._connection._conn

        def run() -> tuple[Any, int, int | None, list[Any]]:
            cursor = raw.cursor()
            try:
                cursor.execute(sql, parameters)
                rows = cursor.fetchall() if cursor.description else []
                return cursor.description, cursor.rowcount, cursor.lastrowid, rows
            finally:
                cursor.close()

        self.description, self.rowcount, self.lastrowid, self._rows = await self._connection.on_thread(run)
        return self

    async def executemany(self, sql: str, parameters: Sequence[Any]) -> OneTripCursor:
        raw = self._connection._conn

        def run() -> tuple[Any, int, int | None]:
            cursor = raw.cursor()
            try:
                cursor.executemany(sql, parameters)
                return cursor.description, cursor.rowcount, cursor.lastrowid
            finally:
                cursor.close()

        self.description, self.rowcount, self.lastrowid = await self._connection.on_thread(run)
        self._rows = []
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


class OneTripConnection(aiosqlite.Connection):
    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    async def on_thread(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the connection's thread (aiosqlite's own queue), in order."""
        done: T = await self._execute(work)  # type: ignore[no-untyped-call]
        return done


async def connect(database: str) -> OneTripConnection:
    """For ``create_async_engine(async_creator=...)``: opened as ``aiosqlite.connect`` opens."""

    def connector() -> sqlite3.Connection:
        return sqlite3.connect(database)

    connection = OneTripConnection(connector, 64)
    connection._thread.daemon = True
    await connection
    return connection
