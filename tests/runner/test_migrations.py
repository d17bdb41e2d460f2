"""``alembic upgrade head`` on an empty database of each backend leaves no drift from
``runner.schema`` (procrastinate's ``test_migration``; ``alembic check`` in spirit)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.db import create_engine
from runner.migrate import current_revision, drift, upgrade

HEAD = "0003"


async def _tables(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))


@pytest.fixture
async def empty_engine(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[AsyncEngine]:
    """A database with nothing in it: a new SQLite file, or a new database on the session's
    MariaDB server (the session database is already migrated)."""
    if backend == "sqlite":
        engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'fresh.sqlite3'}")
        yield engine
        await engine.dispose()
        return
    session_url = sa.engine.make_url(request.getfixturevalue("mariadb_database"))
    name = f"{session_url.database}_empty"
    admin = create_engine(session_url.render_as_string(hide_password=False))
    async with admin.begin() as conn:
        await conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    engine = create_engine(session_url.set(database=name).render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        await engine.dispose()
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f"DROP DATABASE `{name}`")
        await admin.dispose()


async def test_upgrade_head_on_an_empty_database_matches_the_metadata(empty_engine: AsyncEngine) -> None:
    assert await _tables(empty_engine) == set()
    await upgrade(empty_engine)
    assert await current_revision(empty_engine) == HEAD
    expected = {"event_definitions", "event_versions", "event_runs", "event_run_steps", "event_run_log"}
    assert expected <= await _tables(empty_engine)
    differences = await drift(empty_engine)
    assert differences == [], f"the migrations and runner/schema.py disagree: {differences}"
    await upgrade(empty_engine)  # a second upgrade is a no-op
    assert await current_revision(empty_engine) == HEAD


async def test_mariadb_datetimes_are_microsecond_columns(mariadb_database: str) -> None:
    """A plain DATETIME truncates to the second on MariaDB; every datetime must be DATETIME(6)."""
    engine = create_engine(mariadb_database)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.exec_driver_sql(
                    "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND DATA_TYPE = 'datetime'"
                )
            ).all()
    finally:
        await engine.dispose()
    assert len(rows) >= 15
    assert [r for r in rows if r[2] != "datetime(6)"] == []
