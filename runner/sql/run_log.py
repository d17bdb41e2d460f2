"""Statements on ``event_run_log``: the history every transition and every control writes.

The log is also how front ends learn what happened without sharing memory with the process that
did it: the staff log, the live run messages and the Events-tab mirror each follow it with a
``LogFollower``, which delivers every line once, even one committed after a higher id was read.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import run_log

Row = sa.RowMapping


def line(
    run_id: int,
    kind: str,
    at: dt.datetime,
    step_id: int | None = None,
    actor_id: str | None = None,
    actor_name: str | None = None,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One line's row, as ``write_many`` stores it."""
    return {
        "run_id": run_id,
        "step_id": step_id,
        "kind": kind,
        "actor_id": actor_id,
        "actor_name": actor_name[:100] if actor_name else actor_name,
        "detail": detail,
        "at": at,
    }


async def write_many(conn: AsyncConnection, lines: Sequence[dict[str, Any]]) -> None:
    """Several lines (rows from ``line``) in one statement, in order: their ids ascend as the
    list does, which is the order every reader sorts by."""
    if lines:
        await conn.execute(_INSERT, list(lines))


_INSERT = sa.insert(run_log)


async def for_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(run_log).where(run_log.c.run_id == run_id).order_by(run_log.c.id)
    return (await conn.execute(query)).mappings().all()


async def latest_of_kind(conn: AsyncConnection, run_id: int, kind: str) -> Row | None:
    query = (
        sa.select(run_log)
        .where(run_log.c.run_id == run_id, run_log.c.kind == kind)
        .order_by(run_log.c.id.desc())
        .limit(1)
    )
    return (await conn.execute(query)).mappings().first()


async def latest_id(conn: AsyncConnection) -> int:
    return int((await conn.execute(sa.select(sa.func.coalesce(sa.func.max(run_log.c.id), 0)))).scalar() or 0)


# How long after a line was read a lower id may still turn up, committed late. An id is taken at
# the INSERT and becomes visible at the COMMIT, so a reader that has read id 11 may see 10 later:
# on MariaDB when 10's transaction commits after 11's, and on Galera also when 10 was taken on
# another node (ids interleave by auto_increment_increment) that had not yet applied 11. Either
# way 10 was taken before 11 became visible here (a node's counter passes every id it applies),
# so it is visible here within one transaction's INSERT-to-COMMIT time plus twice a node's apply
# lag after 11 was read. The engine writes its lines at the end of short transactions (the
# lines of a block go out as one INSERT when it ends, ``runner.history.written_together``); what
# stretches that time is a COMMIT held up by the server, such as a Galera COMMIT waiting while
# the cluster drops a node that died, for seconds (``tests/runner/test_claim_commit_latency``).
# A minute covers that many times over, and costs a reader only while a gap is open (a re-read
# of the ids above the gap, by the key); a line committed later still is not delivered (it
# stays in the run log, ``/event status`` and the CLI).
SETTLE_SECONDS = 60.0
# A reader that starts "from now" takes the newest lines as read: a line among them committed
# later (in flight at the start) is still delivered.
START_LINES = 1000
# Lines delivered above the oldest hole, at most. Holes are given up after ``SETTLE_SECONDS``,
# so this bounds the set only when lines come faster than this many a minute: the oldest holes
# are given up sooner then.
MAX_DONE = 20_000
_IN_CHUNK = 500


class LogFollower:
    """A reader's place in the run log: every line is returned by ``read`` until the reader says
    it was ``delivered``, and once delivered never returned again, even a line committed after
    a higher id was read (``SETTLE_SECONDS``).

    ``floor``: every line at or below it was delivered (or was given up); ``done``: the lines
    above it delivered already. The two are what a reader persists to resume exactly where it
    was (``bot.staff_log`` records them in its work lease); a follower built from them treats
    every gap below its newest delivered line as a line that may still be committed, for
    ``SETTLE_SECONDS``. While no gap is open (every line from the floor up was delivered, as on
    SQLite, whose writers commit in id order, and on one MariaDB server when no transaction is
    in flight), ``done`` is empty and a read is the one query for the lines past the floor.
    """

    def __init__(
        self,
        floor: int,
        done: Iterable[int] = (),
        *,
        settle_seconds: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.floor = floor
        self._done = {int(i) for i in done if int(i) > floor}
        self._settle_seconds = settle_seconds
        self._clock = clock
        # The newest id read, and when each newest id was first known: a gap below an id known
        # for ``settle_seconds`` is given up.
        self._high = max(self._done, default=floor)
        self._marks: deque[tuple[float, int]] = deque([(clock(), self._high)])
        self._given_up = floor
        self._collapse()

    @classmethod
    async def from_now(
        cls,
        conn: AsyncConnection,
        *,
        settle_seconds: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> LogFollower:
        """A follower that delivers only what is committed from now on (and what is in flight)."""
        query = sa.select(run_log.c.id).order_by(run_log.c.id.desc()).limit(START_LINES)
        newest = [int(i) for i in (await conn.execute(query)).scalars().all()]
        floor = min(newest) - 1 if newest else 0
        return cls(floor, newest, settle_seconds=settle_seconds, clock=clock)

    @property
    def done(self) -> frozenset[int]:
        return frozenset(self._done)

    def copy(self) -> LogFollower:
        """An independent follower in the same place (to go back to when a pass is undone)."""
        twin = LogFollower(self.floor, self._done, settle_seconds=self._settle_seconds, clock=self._clock)
        twin._high, twin._marks, twin._given_up = self._high, deque(self._marks), self._given_up
        return twin

    async def read(
        self, conn: AsyncConnection, limit: int, columns: Sequence[str] = ()
    ) -> tuple[list[Row], bool]:
        """The lines not delivered yet (``columns`` of them, every one by default; ``id`` always),
        in id order: those committed late below the newest read first, then up to ``limit`` past
        it; and whether more are past those."""
        started = self._clock()
        names = dict.fromkeys(["id", *columns])
        selected: Sequence[Any] = [run_log.c[name] for name in names] if columns else [run_log]
        late: list[Row] = []
        if len(self._done) < self._high - self.floor:
            # A gap: an id below the newest read that was not delivered (in flight, rolled
            # back, another node's, or read and not delivered yet). Its ids first, by the key.
            present = (
                sa.select(run_log.c.id)
                .where(run_log.c.id > self.floor, run_log.c.id <= self._high)
                .order_by(run_log.c.id)
            )
            missing = [
                int(i) for i in (await conn.execute(present)).scalars().all() if int(i) not in self._done
            ]
            for start in range(0, len(missing), _IN_CHUNK):
                chunk = missing[start : start + _IN_CHUNK]
                query = sa.select(*selected).where(run_log.c.id.in_(chunk)).order_by(run_log.c.id)
                late.extend((await conn.execute(query)).mappings().all())
        query = sa.select(*selected).where(run_log.c.id > self._high).order_by(run_log.c.id).limit(limit)
        new = list((await conn.execute(query)).mappings().all())
        if new:
            self._high = int(new[-1]["id"])
            self._marks.append((self._clock(), self._high))
        lines = late + new
        self._give_up(started, min((int(line["id"]) for line in lines), default=None))
        return lines, len(new) >= limit

    def delivered(self, ids: Iterable[int]) -> None:
        """These lines went out: never return them again."""
        self._done.update(i for i in ids if i > self.floor)
        self._collapse()

    def _give_up(self, started: float, first_returned: int | None) -> None:
        # Only a read that began ``settle_seconds`` after a line was known looked for the lines
        # below it late enough; the lines it returned are not delivered yet and hold the floor.
        while self._marks and self._marks[0][0] <= started - self._settle_seconds:
            self._given_up = max(self._given_up, self._marks.popleft()[1])
        upto = self._given_up if first_returned is None else min(self._given_up, first_returned - 1)
        if len(self._done) > MAX_DONE:
            upto = max(upto, sorted(self._done)[len(self._done) - MAX_DONE])
            if first_returned is not None:
                upto = min(upto, first_returned - 1)
        if upto > self.floor:
            self.floor = upto
            self._done = {i for i in self._done if i > upto}
        self._collapse()

    def _collapse(self) -> None:
        """Move the floor over the lines delivered right above it: no gap is below them."""
        while self.floor + 1 in self._done:
            self.floor += 1
            self._done.discard(self.floor)
