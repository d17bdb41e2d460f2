"""``alembic upgrade head`` on an empty database of each backend leaves no drift from
``runner.schema`` (procrastinate's ``test_migration``; ``alembic check`` in spirit)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.db import create_engine
from runner.migrate import alembic_config, current_revision, drift, upgrade
from runner.schema import run_log, runs, steps
from runner.sql import runs as runs_sql

HEAD = "0018"
# What each revision after 0006 adds: a database at an earlier revision lacks these too.
ADDED_BY = {
    "0007": {
        ("add_table", "event_run_summaries"),
        ("add_index", "idx_evrun_ended"),
        ("add_index", "idx_evsum_ended"),
        ("add_index", "idx_evsum_pruning"),
    },
    "0008": {("add_table", "runner_processes")},
    "0009": {
        ("add_table", "event_external_claims"),
        ("add_table", "event_work_leases"),
        ("add_index", "idx_evclaim_at"),
    },
    "0010": {
        ("add_table", "event_signups"),
        ("add_table", "event_signup_pools"),
        ("add_table", "event_signup_notices"),
        ("add_table", "event_signup_messages"),
        ("add_index", "idx_evsign_order"),
        ("add_index", "idx_evnotice_open"),
        ("add_index", "idx_evsignmsg_closed"),
    },
    "0011": {
        ("add_table", "event_run_threads"),
        ("add_table", "event_thread_members"),
        ("add_table", "event_attendee_grants"),
        ("add_index", "idx_evthread_open"),
    },
    "0012": {("add_table", "event_signup_imports")},
    "0014": {
        ("add_table", "event_run_undos"),
        ("add_column", "event_runs.cleanup_status"),
        ("add_index", "idx_evundo_run"),
    },
    "0015": {("add_column", "event_signup_pools.staff_override")},
    "0016": {("add_table", "event_attendance"), ("add_index", "idx_evatt_member")},
    "0017": {
        ("add_table", "event_reminder_dms"),
        ("add_table", "member_dm_settings"),
        ("add_index", "idx_evremdm_open"),
    },
    "0018": {
        ("add_column", "event_run_steps.approved_by_id"),
        ("add_column", "event_run_steps.approved_by_name"),
        ("add_column", "event_run_steps.approved_at"),
    },
}


def named(diff: tuple[Any, ...]) -> tuple[str, str]:
    """A drift entry as (what, name): a table or index by its name, a column as table.column."""
    if diff[0] == "add_column":
        return diff[0], f"{diff[2]}.{diff[3].name}"
    return diff[0], diff[1].name


def added_after(revision: str) -> set[tuple[str, str]]:
    """What the revisions after ``revision`` add (0007 on), all together: a column added to a
    table that a later revision creates comes with that table."""
    added = {change for later, changes in ADDED_BY.items() if later > revision for change in changes}
    tables = {name for what, name in added if what == "add_table"}
    return {(what, name) for what, name in added if what != "add_column" or name.split(".")[0] not in tables}


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


def _alembic(engine: AsyncEngine, verb: str, revision: str) -> Any:
    async def go() -> None:
        def run(connection: Any) -> None:
            config = alembic_config()
            config.attributes["connection"] = connection
            getattr(command, verb)(config, revision)

        async with engine.begin() as conn:
            await conn.run_sync(run)

    return go()


T0 = dt.datetime(2026, 5, 1, 18, 0)
ALICE = "alice (123456789012345678)"


async def _seed_at_0003(engine: AsyncEngine) -> None:
    """Rows as revision 0003 stored them (datetimes as SQLAlchemy writes them on SQLite): actors
    as one "name (id)" label, and a manual start that dodged the occurrence key of a scheduled
    run by one microsecond."""
    async with engine.begin() as conn:
        run = conn.exec_driver_sql
        await run(
            "INSERT INTO event_definitions (id, `key`, title, grace_seconds, created_at, updated_at) "
            "VALUES (1, 'quiz', 'Quiz', 900, '2026-05-01 00:00:00.000000', '2026-05-01 00:00:00.000000')"
        )
        await run(
            "INSERT INTO event_versions (id, definition_id, version, content_hash, spec, published_at) "
            "VALUES (1, 1, 1, '0', '{}', '2026-05-01 00:00:00.000000')"
        )
        for run_id, moment, by in ((1, "18:00:00.000000", "schedule"), (2, "18:00:00.000001", ALICE)):
            await run(
                "INSERT INTO event_runs (id, definition_id, version_id, scope, status, health, scheduled_for, "
                "rehearsal, started_by, nudges, created_at, updated_at) VALUES "
                f"({run_id}, 1, 1, '', 'running', 'ok', '2026-05-01 {moment}', 0, '{by}', 0, "
                "'2026-05-01 00:00:00.000000', '2026-05-01 00:00:00.000000')"
            )
        for step_id, settled_by in ((1, f"'{ALICE}'"), (2, "'cli'"), (3, "NULL")):
            await run(
                "INSERT INTO event_run_steps (id, run_id, phase, seq, action_id, action_version, status, "
                "attempts, on_failure, idempotency_key, settled_by, created_at, updated_at) VALUES "
                f"({step_id}, 1, 'main', {step_id}, 'test.cue', 1, 'done', 1, 'pause', 'k{step_id}', "
                f"{settled_by}, '2026-05-01 00:00:00.000000', '2026-05-01 00:00:00.000000')"
            )
        for line_id, actor in ((1, f"'{ALICE}'"), (2, "'schedule'"), (3, "NULL"), (4, "'bob (not an id)'")):
            await run(
                "INSERT INTO event_run_log (id, run_id, kind, actor, at) VALUES "
                f"({line_id}, 1, 'run.status', {actor}, '2026-05-01 18:00:00.000000')"
            )


async def test_0004_splits_actor_labels_once_and_gives_manual_runs_no_occurrence_key(
    empty_engine: AsyncEngine,
) -> None:
    await _alembic(empty_engine, "upgrade", "0003")
    await _seed_at_0003(empty_engine)
    await _alembic(empty_engine, "upgrade", "0004")
    async with empty_engine.connect() as conn:
        actors = (await conn.execute(sa.select(run_log.c.id, run_log.c.actor_id, run_log.c.actor_name))).all()
        settled = (
            await conn.execute(sa.select(steps.c.id, steps.c.settled_by_id, steps.c.settled_by_name))
        ).all()
        occurrences = (
            await conn.execute(sa.select(runs.c.id, runs.c.occurrence_at).order_by(runs.c.id))
        ).all()
    assert sorted(actors) == [
        (1, "123456789012345678", "alice"),
        (2, None, "schedule"),
        (3, None, None),
        (4, None, "bob (not an id)"),
    ]
    assert sorted(settled) == [(1, "123456789012345678", "alice"), (2, None, "cli"), (3, None, None)]
    assert occurrences == [(1, T0), (2, None)]
    # The database still refuses a second run of the scheduled occurrence, and lets a second
    # manual start at the very same instant through.
    common = {"definition_id": 1, "version_id": 1, "scope": "", "concurrency_key": None, "now": T0}
    async with empty_engine.begin() as conn:
        assert await runs_sql.insert(conn, scheduled_for=T0, **common) is None
        assert await runs_sql.insert(conn, scheduled_for=T0, manual=True, **common) is not None
        assert await runs_sql.insert(conn, scheduled_for=T0, manual=True, **common) is not None
    # Later revisions add tables of their own; with them, nothing differs from the metadata.
    await _alembic(empty_engine, "upgrade", "head")
    assert await drift(empty_engine) == []


async def test_0005_adds_the_listings_table_and_its_downgrade_drops_it(empty_engine: AsyncEngine) -> None:
    await _alembic(empty_engine, "upgrade", "0004")
    assert "event_run_listings" not in await _tables(empty_engine)
    await _alembic(empty_engine, "upgrade", "0005")
    assert "event_run_listings" in await _tables(empty_engine)
    # 0006's table (and its index) is the only thing a database at 0005 lacks, beside later ones.
    missing = [named(d) for d in await drift(empty_engine)]
    assert [m for m in missing if m not in added_after("0006")] == [
        ("add_table", "event_run_live_messages"),
        ("add_index", "idx_evlive_closed"),
    ]
    await _alembic(empty_engine, "downgrade", "0004")
    assert "event_run_listings" not in await _tables(empty_engine)


async def test_0006_adds_the_live_messages_table_and_its_downgrade_drops_it(
    empty_engine: AsyncEngine,
) -> None:
    await _alembic(empty_engine, "upgrade", "0005")
    assert "event_run_live_messages" not in await _tables(empty_engine)
    await _alembic(empty_engine, "upgrade", "0006")
    assert "event_run_live_messages" in await _tables(empty_engine)
    # Only the later revisions' tables are missing.
    assert {named(d) for d in await drift(empty_engine)} == added_after("0006")
    await _alembic(empty_engine, "downgrade", "0005")
    assert "event_run_live_messages" not in await _tables(empty_engine)
    assert "event_run_listings" in await _tables(empty_engine)


async def test_0007_adds_the_run_summaries_and_the_ended_index_and_its_downgrade_drops_them(
    empty_engine: AsyncEngine,
) -> None:
    await _alembic(empty_engine, "upgrade", "0007")
    assert "event_run_summaries" in await _tables(empty_engine)
    assert {named(d) for d in await drift(empty_engine)} == added_after("0007")
    await _alembic(empty_engine, "downgrade", "0006")
    assert "event_run_summaries" not in await _tables(empty_engine)
    assert {named(d) for d in await drift(empty_engine)} == added_after("0006")


async def test_0008_adds_the_runner_processes_table_and_its_downgrade_drops_it(
    empty_engine: AsyncEngine,
) -> None:
    await _alembic(empty_engine, "upgrade", "0007")
    assert "runner_processes" not in await _tables(empty_engine)
    await _alembic(empty_engine, "upgrade", "0008")
    assert "runner_processes" in await _tables(empty_engine)
    assert {named(d) for d in await drift(empty_engine)} == added_after("0008")
    await _alembic(empty_engine, "downgrade", "0007")
    assert "runner_processes" not in await _tables(empty_engine)
    assert "event_run_summaries" in await _tables(empty_engine)


async def test_0004_downgrades_to_the_labels_and_the_old_occurrence_key(empty_engine: AsyncEngine) -> None:
    await _alembic(empty_engine, "upgrade", "0003")
    await _seed_at_0003(empty_engine)
    await _alembic(empty_engine, "upgrade", "0004")
    async with empty_engine.begin() as conn:
        # A manual start at the scheduled run's very instant: the old key cannot hold both.
        await conn.exec_driver_sql(
            "INSERT INTO event_runs (id, definition_id, version_id, scope, status, health, scheduled_for, "
            "rehearsal, nudges, created_at, updated_at) VALUES (3, 1, 1, '', 'scheduled', 'ok', "
            "'2026-05-01 18:00:00.000000', 0, 0, '2026-05-01 00:00:00.000000', '2026-05-01 00:00:00.000000')"
        )
    await _alembic(empty_engine, "downgrade", "0003")
    assert await current_revision(empty_engine) == "0003"
    async with empty_engine.connect() as conn:
        actors = (await conn.exec_driver_sql("SELECT id, actor FROM event_run_log ORDER BY id")).all()
        settled = (await conn.exec_driver_sql("SELECT id, settled_by FROM event_run_steps ORDER BY id")).all()
        moments = (await conn.exec_driver_sql("SELECT id, scheduled_for FROM event_runs ORDER BY id")).all()
    assert [tuple(r) for r in actors] == [(1, ALICE), (2, "schedule"), (3, None), (4, "bob (not an id)")]
    assert [tuple(r) for r in settled] == [(1, ALICE), (2, "cli"), (3, None)]
    one = dt.timedelta(microseconds=1)
    # SQLite hands the text back; both read as the same instants.
    got = [(i, m if isinstance(m, dt.datetime) else dt.datetime.fromisoformat(m)) for i, m in moments]
    assert got == [(1, T0), (2, T0 + one), (3, T0 + 2 * one)]


async def test_0009_adds_the_claims_and_work_leases_tables_and_its_downgrade_drops_them(
    empty_engine: AsyncEngine,
) -> None:
    tables = {"event_external_claims", "event_work_leases"}
    await _alembic(empty_engine, "upgrade", "0008")
    assert not tables & await _tables(empty_engine)
    await _alembic(empty_engine, "upgrade", "0009")
    assert tables <= await _tables(empty_engine)
    assert {named(d) for d in await drift(empty_engine)} == added_after("0009")
    await _alembic(empty_engine, "downgrade", "0008")
    assert not tables & await _tables(empty_engine)
    assert "runner_processes" in await _tables(empty_engine)
