"""The run log's one follower (``runner.sql.run_log.LogFollower``): every line once, to each reader,
even a line committed after a higher id was read.

The two-writer tests need a server where two transactions insert at once (MariaDB); the rest run
on both backends. A fake clock stands for the time a gap is held open.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.live import LiveMessages
from runner.schema import run_log
from runner.sql import run_log as run_log_sql
from runner.sql.run_log import LogFollower

AT = dt.datetime(2026, 1, 1, 12, 0)


class Clock:
    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


async def _write(conn: AsyncConnection, kind: str) -> int:
    await run_log_sql.write_many(conn, [run_log_sql.line(1, kind, AT)])
    return int((await conn.execute(sa.select(sa.func.max(run_log.c.id)))).scalar() or 0)


async def _commit_one(engine: AsyncEngine, kind: str) -> int:
    async with engine.begin() as conn:
        return await _write(conn, kind)


async def _read(engine: AsyncEngine, follower: LogFollower, limit: int = 100) -> list[str]:
    """One pass of a reader that delivers all it reads: the kinds it got."""
    async with engine.connect() as conn:
        rows, _more = await follower.read(conn, limit)
    follower.delivered(int(r["id"]) for r in rows)
    return [str(r["kind"]) for r in rows]


async def _from_now(engine: AsyncEngine, clock: Clock) -> LogFollower:
    async with engine.connect() as conn:
        return await LogFollower.from_now(conn, clock=clock)


@pytest.mark.parametrize("backend", ["mariadb"])
async def test_defect_log_reader_skips_line_committed_after_higher_id(engine: AsyncEngine) -> None:
    """A takes an id and holds its transaction open; B takes the next id and commits first. The
    reader sees B, then (after A commits) A, once; nothing is delivered twice."""
    await _commit_one(engine, "history")
    clock = Clock()
    follower = await _from_now(engine, clock)
    async with engine.connect() as writer_a, engine.connect() as writer_b:
        transaction_a = await writer_a.begin()
        id_a = await _write(writer_a, "a")
        async with writer_b.begin():
            id_b = await _write(writer_b, "b")
        assert id_a < id_b  # the case: the lower id commits last
        assert await _read(engine, follower) == ["b"]
        clock.seconds += 5
        assert await _read(engine, follower) == []  # A still open: nothing twice, A not given up
        await transaction_a.commit()
    clock.seconds += 5
    assert await _read(engine, follower) == ["a"]
    assert await _read(engine, follower) == []
    assert await _commit_one(engine, "c") > id_b
    assert await _read(engine, follower) == ["c"]
    assert follower.done == frozenset()  # no gap left open: the floor is the newest line


@pytest.mark.parametrize("backend", ["mariadb"])
async def test_a_line_in_flight_across_a_restart_is_delivered_once_by_the_follower_resumed_from_its_place(
    engine: AsyncEngine,
) -> None:
    """The place a reader persists (``floor`` and ``done``) keeps the promise across a restart
    or a takeover: the resumed follower delivers the late line, and none delivered before."""
    clock = Clock()
    follower = await _from_now(engine, clock)
    async with engine.connect() as writer_a:
        transaction_a = await writer_a.begin()
        await _write(writer_a, "a")
        await _commit_one(engine, "b")
        assert await _read(engine, follower) == ["b"]
        resumed = LogFollower(follower.floor, follower.done, clock=clock)
        await transaction_a.commit()
    assert await _read(engine, resumed) == ["a"]
    assert await _read(engine, resumed) == []


@pytest.mark.parametrize("backend", ["mariadb"])
async def test_a_follower_started_while_a_line_is_in_flight_delivers_it_and_not_the_history(
    engine: AsyncEngine,
) -> None:
    await _commit_one(engine, "history")
    clock = Clock()
    async with engine.connect() as writer_a:
        transaction_a = await writer_a.begin()
        await _write(writer_a, "a")
        await _commit_one(engine, "b")
        follower = await _from_now(engine, clock)
        await transaction_a.commit()
    assert await _read(engine, follower) == ["a"]
    assert await _read(engine, follower) == []


async def test_a_gap_no_line_fills_is_given_up_after_the_settle_time_and_reads_stop_looking(
    engine: AsyncEngine,
) -> None:
    """A rolled-back line leaves a gap (on MariaDB; SQLite reuses the id, which fills it): it is
    looked for until ``SETTLE_SECONDS`` after the line above it was read, then given up."""
    clock = Clock()
    follower = await _from_now(engine, clock)
    async with engine.connect() as conn:
        transaction = await conn.begin()
        await _write(conn, "rolled back")
        await transaction.rollback()
    await _commit_one(engine, "b")
    assert await _read(engine, follower) == ["b"]
    clock.seconds += run_log_sql.SETTLE_SECONDS + 1
    assert await _read(engine, follower) == []
    assert follower.done == frozenset()
    async with engine.connect() as conn:
        assert follower.floor == await run_log_sql.latest_id(conn)


async def test_a_line_read_and_not_delivered_is_read_again_however_late_and_never_after_it_went_out(
    engine: AsyncEngine,
) -> None:
    """A reader that could not deliver a line (its message did not go out) gets it again at its
    next read, past the settle time too; lines after it that went out are not read again."""
    clock = Clock()
    follower = await _from_now(engine, clock)
    for kind in ("a", "b", "c"):
        await _commit_one(engine, kind)
    async with engine.connect() as conn:
        rows, more = await follower.read(conn, 100)
    assert [r["kind"] for r in rows] == ["a", "b", "c"] and not more
    follower.delivered([int(rows[0]["id"]), int(rows[2]["id"])])
    clock.seconds += run_log_sql.SETTLE_SECONDS * 3
    for _ in range(2):
        async with engine.connect() as conn:
            again, _more = await follower.read(conn, 100)
        assert [r["kind"] for r in again] == ["b"]
    follower.delivered([int(again[0]["id"])])
    assert await _read(engine, follower) == []
    assert follower.done == frozenset()


async def test_pages_follow_one_another_and_say_when_more_is_waiting(engine: AsyncEngine) -> None:
    clock = Clock()
    follower = await _from_now(engine, clock)
    for kind in ("a", "b", "c"):
        await _commit_one(engine, kind)
    async with engine.connect() as conn:
        first, more = await follower.read(conn, 2)
        follower.delivered(int(r["id"]) for r in first)
        second, more_after = await follower.read(conn, 2, columns=("kind",))
    assert [r["kind"] for r in first] == ["a", "b"] and more
    assert [r["kind"] for r in second] == ["c"] and not more_after
    assert set(second[0].keys()) == {"id", "kind"}


@pytest.mark.parametrize("backend", ["mariadb"])
async def test_defect_live_messages_miss_a_run_moved_by_a_line_committed_after_a_higher_id(
    engine: AsyncEngine,
) -> None:
    """The live messages' feed of runs that moved (``LiveMessages.changes``) names the run of a
    line committed late, at the read after its COMMIT, and no run twice for one line."""
    live = LiveMessages(engine, "test")
    follower = await live.follow_from_now()
    async with engine.connect() as writer_a:
        transaction_a = await writer_a.begin()
        await run_log_sql.write_many(writer_a, [run_log_sql.line(7, "run.status", AT)])
        async with engine.begin() as writer_b:
            await run_log_sql.write_many(writer_b, [run_log_sql.line(8, "run.status", AT)])
        assert (await live.changes(follower)).run_ids == [8]
        await transaction_a.commit()
    assert (await live.changes(follower)).run_ids == [7]
    assert (await live.changes(follower)).run_ids == []


@pytest.mark.parametrize("backend", ["mariadb"])
async def test_ids_interleaved_as_on_galera_leave_gaps_each_line_once_and_the_gaps_given_up_after_the_settle_time(
    engine: AsyncEngine,
) -> None:
    """On Galera each node takes ids of its own residue (``auto_increment_increment``), so the
    ids one node writes leave gaps no line may ever fill. Here one connection takes every other
    id, as one node of two would: each line is delivered once, the gaps are looked for while
    they may still fill and given up after ``SETTLE_SECONDS``, and then nothing is held."""
    clock = Clock()
    follower = await _from_now(engine, clock)
    async with engine.connect() as node:
        await node.exec_driver_sql("SET SESSION auto_increment_increment = 2, auto_increment_offset = 1")
        await node.commit()  # the SET autobegan a transaction; the session keeps the settings
        for kind in ("a", "b", "c"):
            async with node.begin():
                await _write(node, kind)
        assert await _read(engine, follower) == ["a", "b", "c"]
        assert len(follower.done) >= 2  # the lines above the gaps
        async with node.begin():
            await _write(node, "d")
        await node.exec_driver_sql("SET SESSION auto_increment_increment = 1, auto_increment_offset = 1")
        await node.commit()
    clock.seconds += 5
    assert await _read(engine, follower) == ["d"]
    clock.seconds += run_log_sql.SETTLE_SECONDS
    assert await _read(engine, follower) == []
    assert follower.done == frozenset()
    async with engine.connect() as conn:
        assert follower.floor == await run_log_sql.latest_id(conn)
