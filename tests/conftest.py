"""Shared fixtures: one ``engine`` fixture parametrized over both backends.

* ``sqlite``: a fresh file database per test, built by ``runner.db.create_engine`` (the factory
  every process uses), schema from the Alembic migrations: they run once per session (per xdist
  worker) into ``migrated_sqlite``, and each test gets a copy of that file (a copy takes well
  under a millisecond, the migrations about a quarter of a second, for every SQLite test).
* ``mariadb``: a throwaway ``mariadbd`` started by ``tests/support/mariadb_server.py`` once per
  session, one database per session (schema from the migrations), emptied between tests. The
  engine comes from the same factory with the same options production uses.

When MariaDB cannot be had: outside CI its tests skip with a loud reason; in CI (``CI`` set)
they **fail**, because a suite that skipped its server contract looks exactly like a green one.

Every test named ``test_defect_<n>_...`` (``<n>`` the trial's defect number, ``01``, ``01b``)
carries ``@pytest.mark.defect("<n>")``, set here unless the test sets it itself, so a defect's
tests are found by number wherever their file puts them: ``pytest --defect 6`` runs defect 06's.
The Hypothesis profiles of the two tiers are registered by ``tests/support/tiers.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.db import create_engine
from runner.migrate import upgrade
from runner.schema import metadata
from tests.support import tiers  # noqa: F401 - registers the tiers' Hypothesis profiles
from tests.support.mariadb_server import ThrowawayMariaDB, find_mariadbd
from tests.support.world import World

# Every REST request a simcord test's bot makes is held to Discord's OpenAPI description.
pytest_plugins = ("tests.support.discord_openapi_plugin",)

IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
BACKENDS = ("sqlite", "mariadb")


DEFECT_NAME = re.compile(r"^test_defect_(\d+[a-z]?)_")


class MariaDBUnavailable(Exception):
    pass


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--defect",
        action="append",
        default=[],
        metavar="ID",
        help="run only the tests that pin defect ID (named test_defect_<ID>_... or marked defect(ID)); "
        "repeatable; 6 and 06 are the same defect",
    )


def defect_id(text: str) -> str:
    """One spelling per defect: ``06``, ``6`` and ``006`` are all defect ``6``; ``01b`` is ``1b``."""
    match = re.fullmatch(r"0*(\d+)([a-z]?)", text.strip().lower())
    if match is None:
        raise pytest.UsageError(f"a defect id is a number with an optional letter (06, 01b), not {text!r}")
    return match[1] + match[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("defect") is None:
            named = DEFECT_NAME.match(getattr(item, "originalname", item.name))
            if named:
                item.add_marker(pytest.mark.defect(named[1]))
    wanted = {defect_id(given) for given in config.getoption("defect")}
    if not wanted:
        return
    kept, dropped = [], []
    for item in items:
        marks = item.iter_markers("defect")
        ids = {defect_id(str(arg)) for mark in marks for arg in mark.args}
        (kept if ids & wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# The command line falls back to ./config.yaml, and setup.md has a user write one in the checkout
# (issue 26 item 5: the demo's test failed on it). Where it points while a test runs: never a file.
NO_USERS_CONFIG = os.path.join(os.devnull, "config.yaml")


@pytest.fixture(autouse=True)
def no_users_config(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test never reads the config.yaml a user made for their own server. A test that uses
    ``isolated`` (tests/cli/conftest.py) runs in an empty directory of its own, so its fallback
    to ./config.yaml is left on, for the tests of that fallback; for every other test it is off."""
    if "isolated" not in request.fixturenames:
        monkeypatch.setattr("cli.common.DEFAULT_CONFIG", NO_USERS_CONFIG)


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[ThrowawayMariaDB | str]:
    """The server for the session: ``EVENTBOT_TEST_MARIADB_URL`` (an account that may create
    databases) if set, else a throwaway ``mariadbd``."""
    given = os.environ.get("EVENTBOT_TEST_MARIADB_URL")
    if given:
        yield given
        return
    if find_mariadbd() is None:
        _unavailable(
            "no mariadbd on this machine: install Debian's mariadb-server (scripts/test does when it can) "
            "or set EVENTBOT_TEST_MARIADB_URL"
        )
    server = ThrowawayMariaDB(verbose=False)
    try:
        server.start()
    except Exception as exc:  # the server's own log tail is in the message
        _unavailable(f"the throwaway MariaDB did not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"MariaDB tests must run in CI, but: {reason}", pytrace=False)
    pytest.skip(f"MARIADB TESTS SKIPPED (outside CI only): {reason}")


def _url_with_database(server: ThrowawayMariaDB | str, database: str) -> str:
    if isinstance(server, str):
        return sa.engine.make_url(server).set(database=database).render_as_string(hide_password=False)
    return server.url(database)


@pytest.fixture(scope="session")
def mariadb_database(mariadb_server: ThrowawayMariaDB | str) -> Iterator[str]:
    """One migrated database for the session; its URL."""
    name = f"eventbot_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin_url = _url_with_database(mariadb_server, "mysql")
    url = _url_with_database(mariadb_server, name)

    async def create() -> None:
        admin = create_engine(admin_url)
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        await admin.dispose()
        engine = create_engine(url)
        await upgrade(engine)
        await engine.dispose()

    async def drop() -> None:
        admin = create_engine(admin_url)
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        await admin.dispose()

    _run_in_thread(create)
    try:
        yield url
    finally:
        _run_in_thread(drop)


def _run_in_thread(make: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a coroutine to completion on its own loop in a worker thread: session fixtures are
    first requested from inside a test's running loop, where ``asyncio.run`` is refused."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: asyncio.run(make())).result()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file the Alembic migrations have brought to head, once per session: the template
    ``fresh_sqlite`` copies for each test."""
    path = tmp_path_factory.mktemp("migrated-sqlite") / "template.sqlite3"

    async def migrate() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{path}")
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    _run_in_thread(migrate)
    # WAL mode: the last connection's close checkpoints the log into the file and removes it, so
    # the file alone is the whole database. A -wal or -shm left beside it would mean it is not.
    beside = sorted(other.name for other in path.parent.iterdir() if other != path)
    assert not beside, f"the migrated template is not one file: {beside}"
    return path


def fresh_sqlite(template: Path, directory: Path, name: str = "eventbot.sqlite3") -> str:
    """A copy of the migrated ``template`` at ``directory / name``; its URL."""
    path = directory / name
    shutil.copyfile(template, path)
    return f"sqlite+aiosqlite:///{path}"


async def _empty(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            await conn.execute(table.delete())


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def engine(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    if backend == "sqlite":
        engine = create_engine(fresh_sqlite(request.getfixturevalue("migrated_sqlite"), tmp_path))
    else:
        url = request.getfixturevalue("mariadb_database")
        engine = create_engine(url)
        await _empty(engine)
    try:
        yield engine
        checked_out = engine.pool.checkedout()  # type: ignore[attr-defined]
        assert checked_out == 0, f"{checked_out} pooled connection(s) leaked by the test"
    finally:
        await engine.dispose()


@pytest.fixture
async def sqlite_engine(migrated_sqlite: Path, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """SQLite only, for tests about behaviour rather than the server contract."""
    engine = create_engine(fresh_sqlite(migrated_sqlite, tmp_path))
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
def world(engine: AsyncEngine) -> World:
    return World(engine)
