"""Claims of external events and work leases (``bridge.exclusive``), on SQLite and a real
MariaDB: several processes, each with its own engine (its own connections), race for the same
claim or lease, and exactly one wins, under MariaDB's matched-rows count too."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.exclusive import ExternalClaims, WorkLeases
from runner.db import create_engine
from tests.support.world import T0

PROCESSES = 6
LEASE = 20.0


@pytest.fixture
async def engines(engine: AsyncEngine) -> AsyncIterator[list[AsyncEngine]]:
    """One engine per process, all on the test's database."""
    url = engine.url.render_as_string(hide_password=False)
    others = [create_engine(url) for _ in range(PROCESSES - 1)]
    try:
        yield [engine, *others]
    finally:
        for other in others:
            await other.dispose()


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


async def test_an_event_delivered_to_every_process_is_claimed_by_exactly_one(
    engines: list[AsyncEngine],
) -> None:
    books = [ExternalClaims(e, f"process-{i}") for i, e in enumerate(engines)]
    for event in range(20):
        key = f"interaction:{event}"
        won = await asyncio.gather(*(book.claim(key, T0) for book in books))
        assert won.count(True) == 1, (event, won)
        winner = books[won.index(True)]
        assert await books[0].claimant(key) == winner.owner
        # Delivered again (a gateway resend): nobody takes it a second time.
        assert not any(await asyncio.gather(*(book.claim(key, at(1)) for book in books)))


async def test_old_claims_are_pruned_and_recent_ones_kept(engine: AsyncEngine) -> None:
    book = ExternalClaims(engine, "process-0")
    assert await book.claim("interaction:old", T0)
    assert await book.claim("interaction:new", at(3600))
    assert await book.prune(at(1800)) == 1
    assert await book.claimant("interaction:old") is None
    assert await book.claimant("interaction:new") == "process-0"
    # A pruned id could be claimed again; it never is: Discord's token lived 15 minutes.
    assert await book.claim("interaction:old", at(3601))


async def test_a_free_lease_is_taken_by_exactly_one_of_many_processes_at_once(
    engines: list[AsyncEngine],
) -> None:
    leases = [WorkLeases(e, f"process-{i}", seconds=LEASE) for i, e in enumerate(engines)]
    taken = await asyncio.gather(*(lease.take("staff-log", T0) for lease in leases))
    assert sum(t is not None for t in taken) == 1, taken
    holder = leases[next(i for i, t in enumerate(taken) if t is not None)]
    # It runs out unrenewed; every process races for it again: one takes it over.
    later = at(LEASE + 1)
    taken = await asyncio.gather(*(lease.take("staff-log", later) for lease in leases))
    assert sum(t is not None for t in taken) == 1, taken
    assert sum(lease.holds("staff-log") for lease in leases) == 1
    new_holder = leases[next(i for i, t in enumerate(taken) if t is not None)]
    if new_holder is not holder:
        assert not await holder.save("staff-log", 1, [], later), "the old holder is told it lost it"


async def test_a_takeover_starts_where_the_holder_got_to(engines: list[AsyncEngine]) -> None:
    a = WorkLeases(engines[0], "process-a", seconds=LEASE)
    b = WorkLeases(engines[1], "process-b", seconds=LEASE)
    first = await a.take("staff-log", T0)
    assert first is not None and first.fresh and first.position is None
    assert await b.take("staff-log", at(1)) is None, "held by a"
    assert await a.save("staff-log", 42, [45, 44], at(2))
    # Within the first third of the lease, a pass neither renews nor rewrites the same progress.
    renewed = await a.take("staff-log", at(3))
    assert renewed is not None and not renewed.fresh and renewed.lapsed_at is None
    assert await a.save("staff-log", 42, [44, 45], at(4))
    # Past it, a pass renews: the lease now runs out at 10 + LEASE.
    assert await a.take("staff-log", at(10)) is not None
    assert await b.take("staff-log", at(10 + LEASE - 1)) is None
    # a stops passing: b takes it over when it runs out, where a got to.
    taken = await b.take("staff-log", at(10 + LEASE))
    assert taken is not None and taken.fresh
    assert (taken.position, taken.done, taken.lapsed_at) == (42, frozenset({44, 45}), at(10 + LEASE))
    assert not await a.save("staff-log", 43, [], at(10 + LEASE + 1)), "a lost it and must stop"
    assert not a.holds("staff-log")
    assert await a.take("staff-log", at(10 + LEASE + 2)) is None


async def test_a_lease_given_back_is_taken_over_at_once(engines: list[AsyncEngine]) -> None:
    a = WorkLeases(engines[0], "process-a", seconds=LEASE)
    b = WorkLeases(engines[1], "process-b", seconds=LEASE)
    assert await a.take("events-mirror", T0) is not None
    await a.save("events-mirror", 7, [], at(1))
    await a.give_back("events-mirror", at(2))
    assert not a.holds("events-mirror")
    taken = await b.take("events-mirror", at(2))
    assert taken is not None and taken.fresh
    assert (taken.position, taken.lapsed_at) == (7, at(2))
    # Giving back a lease it no longer holds changes nothing.
    await a.give_back("events-mirror", at(3))
    assert b.holds("events-mirror") and await a.take("events-mirror", at(3)) is None


async def test_a_claim_is_a_small_part_of_the_three_seconds_discord_gives_an_answer(
    engines: list[AsyncEngine],
) -> None:
    """The claim is on the path of every answer: 100 claims raced by two processes, each
    committed, take milliseconds (the acknowledgement must come within Discord's 3 s)."""
    a, b = (ExternalClaims(e, f"process-{i}") for i, e in enumerate(engines[:2]))
    timings: list[float] = []
    for event in range(100):
        key = f"interaction:timed-{event}"
        started = time.perf_counter()
        won = await asyncio.gather(a.claim(key, T0), b.claim(key, T0))
        timings.append(time.perf_counter() - started)
        assert sorted(won) == [False, True]
    timings.sort()
    print(
        f"\n{engines[0].dialect.name}: a claim raced by two processes: {timings[50] * 1000:.1f} ms median, "
        f"{timings[-1] * 1000:.1f} ms max"
    )
    assert timings[-1] < 1.0
