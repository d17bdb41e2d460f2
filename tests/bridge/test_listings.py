"""The listing service's claims and change detection, on SQLite and MariaDB: what a Discord
scheduled event should show, who may push it, and that an idle pass finds nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from bridge.listings import ListingService, ListingStatus, desired_state
from bridge.sql import listings as listings_sql
from runner import catalog, definitions
from runner.clock import ManualClock
from runner.controls import Controls
from runner.history import Actor
from runner.schema import listings
from runner.sql import runs as runs_sql
from tests.support.definitions import event, phase, wait

T0 = dt.datetime(2030, 5, 1, 12, 0)
HOUR = dt.timedelta(hours=1)


def spec(key: str = "quiz", **fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"duration": "90m", "discord_event": True, "scopes": ["eu"], "title": "Pub Quiz"}
    values.update(fields)
    return event(key, phase("main", wait(60)), description="Trivia night.", **values)


async def published(engine: AsyncEngine, raw: dict[str, Any]) -> catalog.Published:
    definition = definitions.validate(raw, validation_registry(), now=T0)
    return await catalog.publish(engine, definition, T0, actor=Actor(None, "test"))


async def occurrence(engine: AsyncEngine, pub: catalog.Published, at: dt.datetime, scope: str = "eu") -> int:
    async with engine.begin() as conn:
        run_id = await runs_sql.insert(
            conn,
            definition_id=pub.definition_id,
            version_id=pub.version_id,
            scope=scope,
            scheduled_for=at,
            concurrency_key=None,
            now=T0,
        )
    assert run_id is not None
    return run_id


def service(engine: AsyncEngine, clock: ManualClock, owner: str, **options: Any) -> ListingService:
    return ListingService(engine, catalog.VersionCache(), clock, owner, **options)


def test_desired_state_names_the_scope_and_ends_after_the_duration() -> None:
    definition = definitions.validate(spec(), validation_registry(), now=T0)
    desired = desired_state(
        7, definition, scope="eu", status="running", scheduled_for=T0, mirror_by_default=False
    )
    assert desired is not None
    assert (desired.name, desired.description, desired.location) == (
        "Pub Quiz (eu)",
        "Trivia night.",
        "Discord",
    )
    assert (desired.start, desired.end, desired.status) == (T0, T0 + 1.5 * HOUR, ListingStatus.ACTIVE)
    for status, listed in [("missed", "cancelled"), ("failed", "cancelled"), ("completed", "completed")]:
        other = desired_state(
            7, definition, scope="", status=status, scheduled_for=T0, mirror_by_default=False
        )
        assert other is not None and other.status == listed and other.name == "Pub Quiz"
    long = definitions.validate(spec(title="x" * 200), validation_registry(), now=T0)
    cut = desired_state(1, long, scope="eu", status="scheduled", scheduled_for=T0, mirror_by_default=False)
    assert cut is not None and len(cut.name) == 100


async def test_two_services_passing_at_once_claim_a_new_listing_once(engine: AsyncEngine) -> None:
    pub = await published(engine, spec())
    run_id = await occurrence(engine, pub, T0 + HOUR)
    clock = ManualClock(T0)
    first, second = service(engine, clock, "a"), service(engine, clock, "b")
    got = await asyncio.gather(first.due(), second.due())
    assert sorted(len(w) for w in got) == [0, 1]
    [work] = [w for batch in got for w in batch]
    assert work.desired.run_id == run_id and work.fresh
    # Neither takes it again while the claim holds, nor after it is settled unchanged.
    assert await first.due() == [] and await second.due() == []
    winner = first if got[0] else second
    await winner.settle(work, "123", "scheduled")
    clock.advance(600)
    assert await first.due() == [] and await second.due() == []


async def test_a_claim_is_compare_and_set_with_a_lease(engine: AsyncEngine) -> None:
    pub = await published(engine, spec())
    run_id = await occurrence(engine, pub, T0 + HOUR)
    until = T0 + dt.timedelta(minutes=2)
    async with engine.begin() as conn:
        assert await listings_sql.claim_new(conn, run_id, "a", until, T0)
        assert not await listings_sql.claim_new(conn, run_id, "b", until, T0)
        assert await listings_sql.claim(conn, run_id, "b", until, T0) is None, "a live claim refuses others"
        later = until + dt.timedelta(seconds=1)
        assert await listings_sql.claim(conn, run_id, "b", later + HOUR, later) is not None
        assert await listings_sql.claim(conn, run_id, "c", later + HOUR, later) is None
        # The old holder's settle is refused: the claim moved on.
        assert not await listings_sql.settle(
            conn, run_id, "a", external_id="1", pushed="x", pushed_status="scheduled", now=later
        )
        assert await listings_sql.settle(
            conn, run_id, "b", external_id="1", pushed="x", pushed_status="completed", now=later
        )
        # A final listing is never claimed again.
        assert await listings_sql.claim(conn, run_id, "c", later + HOUR, later + HOUR) is None


async def test_an_idle_pass_claims_nothing_and_a_cancel_is_found_in_the_log(engine: AsyncEngine) -> None:
    pub = await published(engine, spec())
    run_id = await occurrence(engine, pub, T0 + HOUR)
    clock = ManualClock(T0)
    mirror = service(engine, clock, "a")
    [work] = await mirror.due()
    await mirror.settle(work, "55", "scheduled")
    for _ in range(3):
        clock.advance(5)
        assert await mirror.due() == []
    controls = Controls(engine, clock=clock, versions=catalog.VersionCache())
    assert (await controls.cancel(run_id, reason="host is ill")).ok
    [change] = await mirror.due()
    assert change.desired.status is ListingStatus.CANCELLED
    assert (change.external_id, change.fresh) == ("55", False)


async def test_the_horizon_and_the_cap_bound_what_is_listed(engine: AsyncEngine) -> None:
    pub = await published(engine, spec())
    plain = await published(engine, spec("plain", discord_event=False))
    near = [await occurrence(engine, pub, T0 + n * HOUR) for n in (1, 2, 3)]
    await occurrence(engine, plain, T0 + HOUR)
    await occurrence(engine, pub, T0 + 48 * HOUR)  # beyond the horizon
    clock = ManualClock(T0)
    mirror = service(engine, clock, "a", horizon_seconds=24 * 3600, max_listed=2)
    first = await mirror.due()
    assert [w.desired.run_id for w in first] == near[:2], "nearest first, never more than the cap"
    for work in first:
        await mirror.settle(work, str(work.desired.run_id), "scheduled")
    assert await mirror.due() == []
    # One listed occurrence ends: the next one takes its place.
    async with engine.begin() as conn:
        await conn.execute(
            sa.update(listings).where(listings.c.run_id == near[0]).values(pushed_status="completed")
        )
    assert [w.desired.run_id for w in await mirror.due()] == [near[2]]


async def test_a_start_up_reconcile_looks_at_every_open_listing(engine: AsyncEngine) -> None:
    pub = await published(engine, spec())
    run_id = await occurrence(engine, pub, T0 + HOUR)
    clock = ManualClock(T0)
    first = service(engine, clock, "a")
    [work] = await first.due()
    await first.settle(work, "9", "scheduled", digest="stale")
    # A new process: what was pushed differs from what the run wants, so it is claimed again.
    [again] = await service(engine, clock, "b").due()
    assert (again.desired.run_id, again.external_id) == (run_id, "9")


async def test_a_run_re_pointed_at_a_new_version_gets_the_new_text(engine: AsyncEngine) -> None:
    """However a publish re-points runs, the next pass compares every open listing with its
    run's own (new) version and pushes what changed."""
    pub = await published(engine, spec())
    run_id = await occurrence(engine, pub, T0 + HOUR)
    clock = ManualClock(T0)
    mirror = service(engine, clock, "a")
    [work] = await mirror.due()
    await mirror.settle(work, "77", "scheduled")
    assert await mirror.due() == []
    newer = await published(engine, spec(title="Grand Pub Quiz"))
    async with engine.begin() as conn:
        await conn.execute(
            sa.update(runs_sql.runs).where(runs_sql.runs.c.id == run_id).values(version_id=newer.version_id)
        )
    [edit] = await mirror.due()
    assert (edit.desired.name, edit.external_id) == ("Grand Pub Quiz (eu)", "77")


async def test_a_push_whose_process_died_is_taken_over_when_its_lease_runs_out(engine: AsyncEngine) -> None:
    pub = await published(engine, spec())
    run_id = await occurrence(engine, pub, T0 + HOUR)
    clock = ManualClock(T0)
    dead = service(engine, clock, "dead", lease_seconds=60)
    [work] = await dead.due()  # claimed, then the process is gone
    alive = service(engine, clock, "alive")
    await alive.due()  # its start-up reconcile: the claim still holds
    assert await alive.due() == []
    clock.advance(61)
    [taken] = await alive.due()
    assert (taken.desired.run_id, taken.fresh, taken.external_id) == (run_id, False, None)
    assert work.fresh, "the first claim knew no request had been made; the takeover must look first"
