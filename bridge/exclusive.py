"""Work done once among several processes on one database: claims of external events by id,
and leases on work that runs all the time.

Two front-end processes on one database both receive everything their platform sends them; the
tick is already safe (runs and steps are leased row by row). What is left is of two kinds:

* **An external event every process receives** (each its own id): ``ExternalClaims.claim``
  inserts the id in a transaction of its own and answers whether this process took it. The
  answer is given only after the commit, so nothing acts on a claim a Galera node refuses at
  ``COMMIT``. The claims are pruned by age (``prune``).
* **Work only one process may do at a time**, such as following a log and posting what it
  says: ``WorkLeases`` holds a named lease, renewed each pass, taken over by another process
  once it expires, and given back on a clean shutdown so the other takes over at its next
  pass. The holder records where it got to (``save``), so whoever takes over starts there.

Every method holds exactly one transaction, so it may be run again when it loses a lock
conflict (``retry_on_conflict``). A database that cannot be reached raises; the callers treat
that as "not mine" and do nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.sql import exclusive_work as sql
from bridge.sql.exclusive_work import LeaseHeld
from runner.db import retry_on_conflict


class ExternalClaims:
    def __init__(self, engine: AsyncEngine, owner: str) -> None:
        self.engine = engine
        self.owner = owner

    @retry_on_conflict
    async def claim(self, external_id: str, now: dt.datetime) -> bool:
        """True when this process took ``external_id`` (committed); False when another has it."""
        async with self.engine.begin() as conn:
            return await sql.claim_external(conn, external_id, self.owner, now)

    async def claimant(self, external_id: str) -> str | None:
        async with self.engine.connect() as conn:
            return await sql.claimant(conn, external_id)

    @retry_on_conflict
    async def prune(self, before: dt.datetime) -> int:
        async with self.engine.begin() as conn:
            return await sql.prune_claims(conn, before)


@dataclass(frozen=True)
class Taken:
    """A lease held for this pass. ``fresh``: it was not held by this process a pass ago (first
    take, or a takeover), so in-memory progress must be rebuilt; ``position`` and ``done``: what
    the last holder recorded; ``lapsed_at``: when the lease ran out or was given back before
    this take (None when it was never held, or this process renews it)."""

    fresh: bool
    position: int | None
    done: frozenset[int]
    lapsed_at: dt.datetime | None


class WorkLeases:
    """One process's leases on named work. ``seconds`` is how long a lease lasts unrenewed: a
    few of the work's passes, so a holder that stops passing is taken over soon after."""

    def __init__(self, engine: AsyncEngine, owner: str, *, seconds: float) -> None:
        self.engine = engine
        self.owner = owner
        self.seconds = seconds
        self._held: set[str] = set()
        # When each lease held was last renewed, and the progress last recorded in it: a take
        # or save that would change neither while most of the lease is left writes nothing (a
        # loop passes at every nudge, and each write is a transaction on the one database).
        self._renewed: dict[str, dt.datetime] = {}
        self._saved: dict[str, tuple[int | None, tuple[int, ...]]] = {}

    def forget(self, name: str) -> None:
        """Treat the next take of ``name`` as fresh (this process lost track of its progress)."""
        self._held.discard(name)

    def _renewal_due(self, name: str, now: dt.datetime) -> bool:
        renewed = self._renewed.get(name)
        return name not in self._held or renewed is None or now >= renewed + self._margin()

    def _margin(self) -> dt.timedelta:
        # Renewed once a third of the lease has passed: two thirds are always left.
        return dt.timedelta(seconds=self.seconds / 3)

    def holds(self, name: str) -> bool:
        """Whether this process held ``name`` at its last take or save."""
        return name in self._held

    async def take(self, name: str, now: dt.datetime) -> Taken | None:
        """Hold ``name`` for the next ``seconds``; None when another process holds it."""
        if not self._renewal_due(name, now):
            return Taken(False, None, frozenset(), None)
        try:
            before = await self._take(name, now)
        except LeaseHeld:
            self._held.discard(name)
            return None
        except BaseException:
            # Not known to be ours any more: the next take that succeeds rebuilds from the row.
            self._held.discard(name)
            raise
        fresh = name not in self._held
        self._held.add(name)
        self._renewed[name] = now
        if fresh:
            self._saved.pop(name, None)
        if before is None:
            return Taken(fresh, None, frozenset(), None)
        renewed = before["owner"] == self.owner and before["lease_until"] > now
        return Taken(
            fresh,
            before["position"],
            frozenset(int(i) for i in before["done"] or ()),
            None if renewed else before["lease_until"],
        )

    @retry_on_conflict
    async def _take(self, name: str, now: dt.datetime) -> sql.Row | None:
        async with self.engine.begin() as conn:
            return await sql.take_lease(conn, name, self.owner, self._until(now), now)

    async def save(self, name: str, position: int | None, done: Sequence[int], now: dt.datetime) -> bool:
        """Record the progress and renew; False (and no longer held) when another process took
        the lease over meanwhile."""
        progress = (position, tuple(sorted(done)))
        if self._saved.get(name) == progress and not self._renewal_due(name, now):
            return True
        kept = await self._save(name, position, list(progress[1]), now)
        if not kept:
            self._held.discard(name)
            return False
        self._renewed[name] = now
        self._saved[name] = progress
        return True

    @retry_on_conflict
    async def _save(self, name: str, position: int | None, done: list[int], now: dt.datetime) -> bool:
        async with self.engine.begin() as conn:
            return await sql.save_position(conn, name, self.owner, position, done, self._until(now), now)

    async def give_back(self, name: str, now: dt.datetime) -> None:
        if name not in self._held:
            return
        self._held.discard(name)
        await self._give_back(name, now)

    @retry_on_conflict
    async def _give_back(self, name: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await sql.give_back(conn, name, self.owner, now)

    def _until(self, now: dt.datetime) -> dt.datetime:
        return now + dt.timedelta(seconds=self.seconds)
