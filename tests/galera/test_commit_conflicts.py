"""Defects the Galera cluster provokes for real: a conflict raised at COMMIT, after every
statement of the transaction had already reported its rows.

The conflict is made the way it happens in production: while the runner's transaction on node 1
waits to commit, node 0 commits a write to the same row; node 1 then refuses our COMMIT with
1213 and ``retry_on_conflict`` runs the transaction again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from runner.db import CONFLICTS, create_engine
from runner.engine import RunnerSettings
from runner.registry import Envelope
from runner.schema import runs, steps
from runner.sql import run_log as run_log_sql
from runner.sql import step_leases
from runner.sql.run_log import LogFollower
from tests.galera.conftest import GaleraDatabase
from tests.support.actions import build_action
from tests.support.galera_cluster import GaleraCluster
from tests.support.world import World, phase, step

RUN_LEASE = 20.0


@pytest.fixture
async def world_on_node_1(galera_database: GaleraDatabase) -> AsyncIterator[World]:
    engine = create_engine(galera_database.urls[1])
    try:
        yield World(engine, settings=RunnerSettings(run_lease_seconds=RUN_LEASE))
    finally:
        await engine.dispose()


def conflict_at_the_claims_commit(
    world: World, cluster: GaleraCluster, database: str, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """At the COMMIT of the first step claim, node 0 writes the same step row first."""
    return on_node_0_at_the_first_claims_commit(
        world,
        cluster,
        monkeypatch,
        lambda step_id: (
            f"UPDATE `{database}`.{steps.name} SET updated_at = updated_at WHERE id = {step_id}; "
            f"UPDATE `{database}`.{steps.name} SET note = 'touched on node 0' WHERE id = {step_id};"
        ),
    )


def on_node_0_at_the_first_claims_commit(
    world: World, cluster: GaleraCluster, monkeypatch: pytest.MonkeyPatch, sql: Callable[[int], str]
) -> list[int]:
    """While the first step claim's COMMIT is pending on the world's node, node 0 runs ``sql``
    (given the claimed step's id) and commits first. Answers the claims made, with -1 where
    node 0 wrote."""
    claims: list[int] = []
    original = step_leases.claim

    async def claim(conn: Any, step_id: int, **kw: Any) -> bool:
        won = await original(conn, step_id, **kw)
        claims.append(step_id)
        return won

    monkeypatch.setattr(step_leases, "claim", claim)

    @event.listens_for(world.engine.sync_engine, "commit")
    def other_node_first(_conn: Any) -> None:
        if len(claims) == 1:
            claims.append(-1)  # once only
            cluster.execute_sql(0, "SET SESSION wsrep_sync_wait = 1; " + sql(claims[0]))

    return claims


async def test_defect_galera_a_claim_retried_after_a_conflict_at_commit_renews_the_run_lease_it_counts_on(
    galera_cluster: GaleraCluster,
    galera_database: GaleraDatabase,
    world_on_node_1: World,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The claim's transaction renews the run lease when the step could outlast it, and set the
    lease's memory of it before the COMMIT: when that COMMIT lost a conflict, the retry believed
    the run lease renewed and skipped the renewal, so the run's row kept the short lease while
    the runner counted on the long one (and another runner could take the run mid-step)."""
    world = world_on_node_1
    leases_at_dispatch: list[tuple[dt.datetime, dt.datetime]] = []

    async def probe(envelope: Envelope, params: Any) -> dict[str, Any]:
        async with world.engine.connect() as conn:
            run_lease = (
                await conn.execute(sa.select(runs.c.claim_expires_at).where(runs.c.id == envelope.run_id))
            ).scalar_one()
            step_lease = (
                await conn.execute(sa.select(steps.c.claim_expires_at).where(steps.c.id == envelope.step_id))
            ).scalar_one()
        leases_at_dispatch.append((run_lease, step_lease))
        return {"ok": True}

    world.register(build_action("test.probe", probe))
    run_id = await world.seed_run([phase("one", step("test.probe"))])
    claims = conflict_at_the_claims_commit(world, galera_cluster, galera_database.name, monkeypatch)
    retried = CONFLICTS.retried

    await world.tick()

    assert claims[:2] == [claims[0], -1] and len(claims) == 3, (
        f"claimed, refused at commit, claimed again: {claims}"
    )
    assert CONFLICTS.retried > retried, "the claim's COMMIT lost a conflict and was retried"
    ((run_lease, step_lease),) = leases_at_dispatch
    assert run_lease == step_lease + dt.timedelta(seconds=RUN_LEASE), (
        f"the run's row says its lease ends {run_lease}; the step it covers is leased until {step_lease}"
    )
    assert (await world.run(run_id))["status"] == "completed"


async def test_defect_galera_a_listing_pass_whose_commit_lost_a_conflict_still_pushes_the_change_it_read(
    galera_cluster: GaleraCluster, galera_database: GaleraDatabase
) -> None:
    """The listing pass advanced its log cursor inside its transaction: when the COMMIT then
    lost a conflict (another node wrote the listing first), the pass raised, its claim was
    rolled back, and the cursor had already moved past the change, so a cancelled occurrence
    stayed listed as scheduled in Discord."""
    from bridge.listings import ListingService, ListingStatus
    from runner import catalog
    from runner.clock import ManualClock
    from runner.controls import Controls
    from runner.schema import listings
    from tests.bridge.test_listings import HOUR, T0, occurrence, published, spec

    engine = create_engine(galera_database.urls[1])
    try:
        pub = await published(engine, spec())
        run_id = await occurrence(engine, pub, T0 + HOUR)
        clock = ManualClock(T0)
        mirror = ListingService(engine, catalog.VersionCache(), clock, "node1")
        [work] = await mirror.due()
        await mirror.settle(work, "55", "scheduled")
        clock.advance(5)
        assert await mirror.due() == []
        controls = Controls(engine, clock=clock, versions=catalog.VersionCache())
        assert (await controls.cancel(run_id, reason="host is ill")).ok

        touched: list[bool] = []

        @event.listens_for(engine.sync_engine, "commit")
        def other_node_first(_conn: Any) -> None:
            if not touched:
                touched.append(True)
                galera_cluster.execute_sql(
                    0,
                    "SET SESSION wsrep_sync_wait = 1; "
                    f"UPDATE `{galera_database.name}`.{listings.name} "
                    f"SET attempts = attempts + 1 WHERE run_id = {run_id};",
                )

        retried = CONFLICTS.retried
        [change] = await mirror.due()
        assert touched and CONFLICTS.retried > retried, "the pass's COMMIT lost a conflict and was retried"
        assert change.desired.status is ListingStatus.CANCELLED
        assert (change.external_id, change.fresh) == ("55", False)
    finally:
        await engine.dispose()


async def test_defect_galera_a_publish_that_lost_a_conflict_at_commit_is_retried_not_refused(
    galera_cluster: GaleraCluster, galera_database: GaleraDatabase
) -> None:
    """Publishing writes the definition's row, and every write to one of its runs (a runner's
    claim on another node) references that row: on one server the runner's write only makes the
    publish wait; on Galera it is certified first and the publish's COMMIT is refused, so
    publishing failed with a raw 1213."""
    from runner.schema import runs as runs_table
    from runner.schema import versions
    from tests.bridge.test_listings import HOUR, T0, occurrence, published, spec

    engine = create_engine(galera_database.urls[1])
    try:
        first = await published(engine, spec())
        run_id = await occurrence(engine, first, T0 + HOUR)
        touched: list[bool] = []

        @event.listens_for(engine.sync_engine, "commit")
        def runner_on_node_0_first(_conn: Any) -> None:
            if not touched:
                touched.append(True)
                galera_cluster.execute_sql(
                    0,
                    "SET SESSION wsrep_sync_wait = 1; "
                    f"UPDATE `{galera_database.name}`.{runs_table.name} "
                    f"SET updated_at = updated_at + INTERVAL 1 SECOND WHERE id = {run_id};",
                )

        retried = CONFLICTS.retried
        second = await published(engine, spec(title="Pub Quiz Night"))
        assert touched and CONFLICTS.retried > retried, "the publish's COMMIT lost a conflict and was retried"
        assert second.changed and second.version == first.version + 1
        async with engine.connect() as conn:
            numbers = (
                (
                    await conn.execute(
                        sa.select(versions.c.version).where(versions.c.definition_id == first.definition_id)
                    )
                )
                .scalars()
                .all()
            )
        assert sorted(numbers) == [1, 2], f"one new version, whatever the retry: {numbers}"
    finally:
        await engine.dispose()


async def test_defect_galera_a_pause_committed_on_another_node_stops_a_claim_waiting_to_commit(
    galera_cluster: GaleraCluster, galera_database: GaleraDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seeds' "pause ignored mid-batch", on two nodes: a step claim reads its run's status
    (paused or cancelled runs are not claimed) without writing the run's row, and a cluster
    certifies only rows written. A pause committed on node 0 while the claim waited to commit on
    node 1 did not conflict with it, so the step went out after the pause. Now a claim on a
    cluster writes its run's row (its lease), the two conflict, and the claim's retry sees the
    pause and claims nothing."""
    # A run lease long enough that no claim needs to renew it for its own sake.
    engine = create_engine(galera_database.urls[1])
    world = World(engine, settings=RunnerSettings(run_lease_seconds=600.0))
    try:
        dispatched: list[int] = []

        async def noop(envelope: Envelope, params: Any) -> dict[str, Any]:
            dispatched.append(envelope.step_id)
            return {"ok": True}

        world.register(build_action("test.noop", noop))
        run_id = await world.seed_run([phase("one", step("test.noop"), step("test.noop"))])
        claims = on_node_0_at_the_first_claims_commit(
            world,
            galera_cluster,
            monkeypatch,
            lambda _: (
                f"UPDATE `{galera_database.name}`.{runs.name} SET status = 'paused' WHERE id = {run_id};"
            ),
        )
        retried = CONFLICTS.retried
        await world.tick()
        assert claims and claims[1] == -1, f"the pause landed while the first claim waited: {claims}"
        assert dispatched == [], "a step went out after the pause had committed on another node"
        assert CONFLICTS.retried > retried, "the claim's COMMIT lost to the pause and was retried"
        assert (await world.run(run_id))["status"] == "paused"
        assert {s["status"] for s in await world.steps_of(run_id)} == {"pending"}
    finally:
        await engine.dispose()


async def test_defect_galera_a_log_line_taken_on_one_node_and_committed_after_a_higher_id_of_another_is_read_once(
    galera_database: GaleraDatabase,
) -> None:
    """Each node takes log ids of its own residue (``auto_increment_increment``): a line taken
    on one node may commit after a higher id taken on another was read. The run log's follower
    (``runner.sql.run_log.LogFollower``, reading on node 1) delivers the higher first, then the
    lower once it commits, and neither twice."""
    at = dt.datetime(2026, 1, 1, 12, 0)
    engines = [create_engine(url) for url in galera_database.urls[:2]]
    reader = engines[1]
    delivered: list[str] = []

    async def read(follower: LogFollower) -> None:
        async with reader.connect() as conn:
            rows, _more = await follower.read(conn, 100)
        follower.delivered(int(r["id"]) for r in rows)
        delivered.extend(str(r["kind"]) for r in rows)

    async def until_delivered(follower: LogFollower, count: int) -> None:
        # Another node's COMMIT is applied here a moment later: read until it is.
        for _ in range(100):
            await read(follower)
            if len(delivered) >= count:
                return
            await asyncio.sleep(0.05)

    try:
        async with reader.connect() as conn:
            follower = await LogFollower.from_now(conn)
        writers = [await engine.connect() for engine in engines]
        try:
            transactions = [await writer.begin() for writer in writers]
            taken = []
            for node, writer in enumerate(writers):
                await run_log_sql.write_many(writer, [run_log_sql.line(1, f"node {node}", at)])
                taken.append(int((await writer.exec_driver_sql("SELECT LAST_INSERT_ID()")).scalar() or 0))
            lower, higher = sorted(range(2), key=lambda node: taken[node])
            assert taken[lower] < taken[higher]
            await transactions[higher].commit()
            await until_delivered(follower, 1)
            assert delivered == [f"node {higher}"]
            await transactions[lower].commit()
        finally:
            for writer in writers:
                await writer.close()
        await until_delivered(follower, 2)
        await read(follower)
        assert delivered == [f"node {higher}", f"node {lower}"]
    finally:
        for engine in engines:
            await engine.dispose()
