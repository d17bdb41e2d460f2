"""The schema and the compare-and-set contract on a three-node Galera cluster.

On Galera a write conflicting with another node's is refused at COMMIT (error 1213), after every
statement of the losing transaction had already reported its rows: a compare-and-set is won only
when its transaction commits. These tests pin that on the real cluster, and that eventbot's retry
turns such a loss into the plain "someone else has it" the single-server path answers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.db import CONFLICTS, create_engine, is_conflict, retry_on_conflict
from runner.migrate import upgrade
from runner.schema import metadata, runs
from runner.sql import run_leases
from tests.galera.conftest import GaleraDatabase
from tests.support.definitions import phase, step
from tests.support.galera_cluster import GaleraCluster
from tests.support.world import T0, World


async def visible(engine: AsyncEngine, run_id: int, within: float = 10.0) -> None:
    """Wait until another node has applied a row committed elsewhere (replication is certified
    synchronously but applied asynchronously)."""
    deadline = time.monotonic() + within
    while True:
        async with engine.connect() as conn:
            found = (await conn.execute(sa.select(runs.c.id).where(runs.c.id == run_id))).first()
        if found is not None:
            return
        assert time.monotonic() < deadline, f"run {run_id} never reached the other node"
        await asyncio.sleep(0.05)


def test_every_table_has_a_primary_key() -> None:
    """Galera replicates a DELETE or UPDATE of a table without a primary key by a full scan on
    every node, and refuses some outright: each table must have one."""
    missing = [t.name for t in metadata.sorted_tables if not t.primary_key.columns]
    assert not missing, f"tables without a primary key: {missing}"


async def test_the_migrations_apply_on_the_cluster_and_every_node_sees_the_schema(
    galera_cluster: GaleraCluster, galera_database: GaleraDatabase
) -> None:
    # The fixture migrated through node 0; running them again through node 2 is the no-op it
    # must be, and every node then has every table of the schema, each with a primary key.
    engine = create_engine(galera_database.urls[2])
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()
    expected = {t.name for t in metadata.sorted_tables}
    for node in range(galera_cluster.size):
        out = galera_cluster.execute_sql(
            node,
            "SELECT t.table_name, COUNT(k.constraint_name) FROM information_schema.tables t "
            "LEFT JOIN information_schema.table_constraints k ON k.table_schema = t.table_schema "
            "AND k.table_name = t.table_name AND k.constraint_type = 'PRIMARY KEY' "
            f"WHERE t.table_schema = '{galera_database.name}' GROUP BY t.table_name",
        )
        tables = dict(line.split("\t") for line in out.splitlines())
        assert expected <= set(tables), f"node {node} lacks {expected - set(tables)}"
        assert all(count == "1" for count in tables.values()), f"node {node}: {tables}"
        engines = galera_cluster.execute_sql(
            node,
            "SELECT DISTINCT engine FROM information_schema.tables "
            f"WHERE table_schema = '{galera_database.name}'",
        )
        assert engines.split() == ["InnoDB"], f"node {node}: only InnoDB replicates, found {engines.split()}"


@pytest.fixture
async def two_nodes(galera_database: GaleraDatabase) -> AsyncIterator[tuple[AsyncEngine, AsyncEngine]]:
    first, second = create_engine(galera_database.urls[0]), create_engine(galera_database.urls[1])
    try:
        yield first, second
    finally:
        await first.dispose()
        await second.dispose()


async def _scheduled_run(engine: AsyncEngine, other: AsyncEngine) -> int:
    world = World(engine)
    run_id = await world.seed_run([phase("one", step("core.wait", {"seconds": 1}))])
    await visible(other, run_id)
    return run_id


async def test_a_compare_and_set_raced_from_two_nodes_is_won_by_one_and_the_loser_fails_at_commit(
    two_nodes: tuple[AsyncEngine, AsyncEngine],
) -> None:
    first, second = two_nodes
    run_id = await _scheduled_run(first, second)
    lease = T0 + dt.timedelta(minutes=5)
    async with first.connect() as a, second.connect() as b:
        await a.begin()
        await b.begin()
        # Row locks are local to a node: neither UPDATE waits for the other, and both match.
        assert await run_leases.claim_start(a, run_id, "node0", lease, T0)
        assert await run_leases.claim_start(b, run_id, "node1", lease, T0)
        await a.commit()
        with pytest.raises(sa.exc.OperationalError) as refused:
            await b.commit()
        assert is_conflict(refused.value), refused.value
        assert refused.value.orig.args[0] == 1213  # type: ignore[union-attr]
        await b.rollback()
    async with second.connect() as b:
        await b.begin()
        assert not await run_leases.claim_start(b, run_id, "node1", lease, T0)
        await b.rollback()
        owner = (await b.execute(sa.select(runs.c.claimed_by).where(runs.c.id == run_id))).scalar_one()
    assert owner == "node0"


async def test_a_claim_lost_at_commit_is_retried_and_answers_that_someone_else_has_it(
    two_nodes: tuple[AsyncEngine, AsyncEngine],
) -> None:
    first, second = two_nodes
    run_id = await _scheduled_run(first, second)
    lease = T0 + dt.timedelta(minutes=5)
    answers: list[bool] = []
    retried_before = CONFLICTS.retried

    @retry_on_conflict
    async def claim_on_the_second_node() -> bool:
        async with second.begin() as conn:
            won = await run_leases.claim_start(conn, run_id, "node1", lease, T0)
            answers.append(won)
            if len(answers) == 1:
                # Node 0 takes the run while our claim, already "won", waits to commit.
                async with first.begin() as other:
                    assert await run_leases.claim_start(other, run_id, "node0", lease, T0)
        return won

    assert await claim_on_the_second_node() is False
    assert answers == [True, False], "the first attempt matched, its commit failed, the retry matched nothing"
    assert CONFLICTS.retried == retried_before + 1
    async with second.connect() as conn:
        owner = (await conn.execute(sa.select(runs.c.claimed_by).where(runs.c.id == run_id))).scalar_one()
    assert owner == "node0"
