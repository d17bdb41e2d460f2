"""The Galera cluster for ``tests/galera``: three nodes started once per session.

The cluster is started by ``tests/support/galera_cluster.py`` (about 10-15 s). When it cannot be
had, outside CI the tests skip with a loud reason; in CI (``CI`` set) they **fail**, as the MariaDB
tests do in ``tests/conftest.py``: a suite that skipped its cluster looks exactly like a green one.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest

from runner.db import create_engine
from runner.migrate import upgrade
from tests.reliability.harness import in_ci
from tests.support.galera_cluster import GaleraCluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test here shares one three-node cluster (about 15 s to start, three mariadbd) and most
    # kill a node or race two against a deadline: heavy, and judged in seconds of wall clock, so
    # they run in scripts/test.py --all's single-process pass, never beside other tests' load and
    # never with a second cluster started by another xdist worker.
    for item in items:
        if "tests/galera/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.galera)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.realtime)


@pytest.fixture(scope="session")
def galera_cluster() -> Iterator[GaleraCluster]:
    try:
        cluster = GaleraCluster(verbose=True)
        cluster.start()
    except Exception as exc:  # the node's own log tail is in the message
        reason = f"the three-node Galera cluster did not start: {exc}"
        if in_ci():
            pytest.fail(f"Galera tests must run in CI, but: {reason}", pytrace=False)
        pytest.skip(f"GALERA TESTS SKIPPED (outside CI only): {reason}")
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass(frozen=True)
class GaleraDatabase:
    """One migrated database on the cluster: its name and a URL per node."""

    name: str
    urls: list[str]


@contextlib.asynccontextmanager
async def own_galera_database(cluster: GaleraCluster) -> AsyncIterator[GaleraDatabase]:
    name = f"eventbot_galera_{uuid.uuid4().hex[:10]}"
    admin = create_engine(cluster.url(0, "mysql"))
    try:
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        await admin.dispose()
    database = GaleraDatabase(name, cluster.urls(name))
    engine = create_engine(database.urls[0])
    try:
        await upgrade(engine)
    except Exception as exc:
        # Say what the cluster looked like, for a failure seen only on a loaded CI machine.
        states = {n.index: cluster.node_state(n.index) for n in cluster.nodes}
        raise AssertionError(f"migrating {name} through node 0 failed: {exc!r}; nodes: {states}") from exc
    finally:
        await engine.dispose()
    try:
        yield database
    finally:
        # Any node that is up will do: a fault test may leave one still rejoining.
        for url in cluster.urls("mysql"):
            admin = create_engine(url)
            try:
                async with admin.begin() as conn:
                    await conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
                break
            except Exception:
                continue
            finally:
                await admin.dispose()


@pytest.fixture
async def galera_database(galera_cluster: GaleraCluster) -> AsyncIterator[GaleraDatabase]:
    """A fresh migrated database on the cluster for one test, dropped afterwards."""
    async with own_galera_database(galera_cluster) as database:
        yield database
