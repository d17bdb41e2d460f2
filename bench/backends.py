"""Where the benchmarks run: a fresh migrated database per measurement, on SQLite or on one
throwaway MariaDB for the whole bench run (``tests.support.mariadb_server``, the same server the
tests start).

Every engine comes from ``runner.db.create_engine`` (the production factory), every schema from
the Alembic migrations (``runner.migrate.upgrade``), so what is measured is what is deployed.
``bench.whatif`` swaps ``create_engine`` in this module to imitate an engine change.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.db import create_engine
from runner.migrate import upgrade


class Backend(Protocol):
    name: str

    async def create(self) -> str:
        """The URL of a new, empty, migrated database."""
        ...

    async def drop(self, url: str) -> None: ...

    def close(self) -> None: ...

    def version(self) -> str: ...


class SQLiteBackend:
    name = "sqlite"

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="eventbot-bench-")

    async def create(self) -> str:
        path = Path(self._dir.name) / f"bench-{uuid.uuid4().hex[:10]}.sqlite3"
        url = f"sqlite+aiosqlite:///{path}"
        await _migrate(url)
        return url

    async def drop(self, url: str) -> None:
        await asyncio.to_thread(self._unlink, sa.engine.make_url(url).database or "")

    @staticmethod
    def _unlink(path: str) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        self._dir.cleanup()

    def version(self) -> str:
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"


class MariaDBBackend:
    """One throwaway ``mariadbd`` for the whole bench run (started here, stopped by ``close``),
    one fresh database per measurement."""

    name = "mariadb"

    def __init__(self) -> None:
        from tests.support.mariadb_server import ThrowawayMariaDB

        self.server = ThrowawayMariaDB(verbose=False)
        self.server.start()

    async def create(self) -> str:
        name = f"bench_{uuid.uuid4().hex[:12]}"
        await asyncio.to_thread(self.server.create_database, name)
        url = self.server.url(name)
        await _migrate(url)
        return url

    async def drop(self, url: str) -> None:
        name = sa.engine.make_url(url).database
        if name:
            await asyncio.to_thread(self.server.drop_database, name)

    def close(self) -> None:
        self.server.stop()

    def version(self) -> str:
        return "MariaDB " + self.server.execute_sql("SELECT VERSION();").strip()

    def status(self) -> dict[str, int]:
        """Server counters: ``Questions`` (statements a client sent, COMMIT and ROLLBACK
        included, pings not; this reading adds one) and ``Rows_read`` (rows the storage
        engine handed up: what a statement examined, not what it matched)."""
        out = self.server.execute_sql("SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Rows_read');")
        return {name: int(value) for name, value in (line.split("\t") for line in out.splitlines())}

    @contextlib.contextmanager
    def slow_log(self) -> Iterator[Path]:
        """Every statement, with its rows examined and the plan it really ran with
        (``log_slow_verbosity=query_plan,explain``), logged while the block runs. The plan
        chosen at run time can differ from what a later EXPLAIN shows (statistics move)."""
        assert self.server.tmpdir is not None
        path = self.server.tmpdir / f"slow-{uuid.uuid4().hex[:8]}.log"
        self.server.execute_sql(
            f"SET GLOBAL slow_query_log_file='{path}'; SET GLOBAL log_slow_verbosity='query_plan,explain'; "
            "SET GLOBAL long_query_time=0; SET GLOBAL slow_query_log=1;"
        )
        try:
            yield path
        finally:
            self.server.execute_sql("SET GLOBAL slow_query_log=0; SET GLOBAL long_query_time=10;")


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


def make_backend(name: str) -> Backend:
    if name == "sqlite":
        return SQLiteBackend()
    if name == "mariadb":
        return MariaDBBackend()
    raise ValueError(f"unknown backend {name!r}")


@contextlib.asynccontextmanager
async def fresh_database(backend: Backend) -> AsyncIterator[str]:
    url = await backend.create()
    try:
        yield url
    finally:
        await backend.drop(url)


@contextlib.asynccontextmanager
async def fresh_engine(backend: Backend) -> AsyncIterator[AsyncEngine]:
    """A new migrated database and a production engine on it, both gone afterwards."""
    async with fresh_database(backend) as url:
        engine = create_engine(url)
        try:
            yield engine
        finally:
            await engine.dispose()
