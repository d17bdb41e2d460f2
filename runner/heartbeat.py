"""A serving process says it is alive: one row in ``runner_processes``, written by its loop.

What the row says, and how ``health`` reads it:

* ``last_seen``: the end of the last tick that beat. A beat is written at most once per tick
  interval (one upsert; ``BEAT_SLACK`` early at most), however often nudges make the loop tick; a process whose row stops
  moving for ``DEAD_AFTER_INTERVALS`` of its own intervals has died or hangs.
* ``tick_lag_ms``: **tick lag**, the most any tick since the previous beat started after the
  moment it was due. A tick is due when the loop's sleep after the one before runs out (the
  interval, or sooner when a run falls due); a tick a nudge brought forward is not late. Lag is
  the process's event loop or its host failing to keep time (blocked by something, starved of
  CPU), not the database: a slow database shows in ``tick_ms``, how long the longest tick took.
* The leases carry the runner's owner string, the row's key, so what each process holds is read
  from the runs and steps themselves.

The row is deleted when the process closes cleanly, and rows of processes not seen for a day are
pruned by the next process to start. Nothing here may stop a tick: a beat that fails is logged
once and tried again at the next.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.clock import Clock
from runner.db import DATABASE_ERRORS
from runner.sql import processes as processes_sql

log = logging.getLogger(__name__)

# A process is taken for dead when it has not beaten for this many of its own intervals ...
DEAD_AFTER_INTERVALS = 3
# ... and never sooner than this: one tick of a large fan-out may take seconds, and the beat
# comes after it.
DEAD_AFTER_FLOOR_SECONDS = 30.0
PRUNE_AFTER = dt.timedelta(days=1)
# A beat is due a little before a whole interval has passed: an idle loop ticks once an interval,
# and a tick a millisecond early must not skip its beat (leaving ``last_seen`` two intervals old).
BEAT_SLACK = 0.1


def dead_after(interval_seconds: float) -> dt.timedelta:
    """How long a process with this tick interval may go without a beat and still be alive."""
    return dt.timedelta(seconds=max(DEAD_AFTER_INTERVALS * interval_seconds, DEAD_AFTER_FLOOR_SECONDS))


def _ms(delta: dt.timedelta) -> int:
    return max(round(delta.total_seconds() * 1000), 0)


class Heartbeat:
    def __init__(
        self,
        engine: AsyncEngine,
        owner: str,
        clock: Clock,
        *,
        interval: float,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        self.engine = engine
        self.owner = owner
        self.clock = clock
        self.interval = interval
        self.host = host if host is not None else socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.started_at = clock.now()
        self.beats = 0
        self._last_beat: dt.datetime | None = None
        self._last_tick: dt.datetime | None = None
        self._worst_lag = dt.timedelta(0)
        self._longest_tick = dt.timedelta(0)
        self._failing: str | None = None
        self._stopped = False
        # A beat and the delete at close never overlap: a beat in flight cannot land after it.
        self._writing = asyncio.Lock()

    def ticked(self, started: dt.datetime, due: dt.datetime | None, finished: dt.datetime) -> None:
        """A tick ran from ``started`` to ``finished``; it was due at ``due`` (None: the first)."""
        if due is not None:
            self._worst_lag = max(self._worst_lag, started - due)
        self._longest_tick = max(self._longest_tick, finished - started)
        self._last_tick = started

    def due(self, now: dt.datetime) -> bool:
        if self._stopped:
            return False
        if self._last_beat is None or now < self._last_beat:
            return True
        return (now - self._last_beat).total_seconds() >= self.interval * (1 - BEAT_SLACK)

    async def beat(self) -> bool:
        """Write the row if a beat is due; True when one was written. Never raises."""
        async with self._writing:
            return await self._beat()

    async def _beat(self) -> bool:
        now = self.clock.now()
        if not self.due(now):
            return False
        try:
            async with self.engine.begin() as conn:
                if self._last_beat is None:
                    await processes_sql.prune(conn, now - PRUNE_AFTER)
                await processes_sql.beat(
                    conn,
                    owner=self.owner,
                    host=self.host,
                    pid=self.pid,
                    started_at=self.started_at,
                    now=now,
                    interval_ms=_ms(dt.timedelta(seconds=self.interval)),
                    last_tick_at=self._last_tick,
                    tick_lag_ms=_ms(self._worst_lag) if self._last_tick is not None else None,
                    tick_ms=_ms(self._longest_tick) if self._last_tick is not None else None,
                )
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if text != self._failing:
                quiet = isinstance(exc, DATABASE_ERRORS)
                # An outage is the loop's to report; anything else is a bug worth its traceback.
                log.warning(
                    "heartbeat not written (%s); trying again at the next tick", text, exc_info=not quiet
                )
                self._failing = text
            return False
        self._failing = None
        self._last_beat = now
        self._worst_lag = dt.timedelta(0)
        self._longest_tick = dt.timedelta(0)
        self.beats += 1
        return True

    async def stop(self) -> None:
        """The process is closing cleanly: delete its row (a database that cannot be reached
        leaves it, to be seen as dead and pruned later). No beat is written after this."""
        self._stopped = True
        try:
            async with self._writing, self.engine.begin() as conn:
                await processes_sql.forget(conn, self.owner)
        except DATABASE_ERRORS as exc:
            log.warning("heartbeat row of %s left behind: %s: %s", self.owner, type(exc).__name__, exc)
