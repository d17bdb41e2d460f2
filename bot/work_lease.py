"""A lease on work one bot process does at a time, for a loop that does it (``WakeableLoop``).

Two bot processes on one database both run the staff log, the live run messages and the
Events-tab mirror loops; each pass first takes (or renews) the work's lease
(``bridge.exclusive.WorkLeases``), and a pass without it does nothing. The lease lasts
``LEASE_PASSES`` loop intervals, so a holder that dies or stops passing is taken over that long
after its last pass; a holder that shuts down cleanly gives it back (``bot.app.EventBot.close``)
and the other process takes over at its next pass.

A database that cannot be reached counts as "not held": the work needs the database anyway,
and nothing is done that the holder might be doing too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from bridge.exclusive import Taken, WorkLeases
from runner.db import DATABASE_ERRORS

log = logging.getLogger(__name__)

# A lease lasts this many of its loop's intervals unrenewed (a pass renews it).
LEASE_PASSES = 4


class WorkLease:
    def __init__(
        self,
        leases: WorkLeases,
        name: str,
        now: Callable[[], datetime],
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self.leases = leases
        self.name = name
        self._now = now
        # True while Discord refuses too much (``bot.invalid_requests``): the pass is skipped,
        # the lease not renewed (another process, elsewhere, may take the work over).
        self._paused = paused
        self._unreachable = False

    @property
    def held(self) -> bool:
        return self.leases.holds(self.name)

    async def take(self) -> Taken | None:
        """Hold the work for this pass; None when another process holds it (or the database
        cannot say), or while this process's Discord requests are paused."""
        if self._paused():
            return None
        try:
            taken = await self.leases.take(self.name, self._now())
        except DATABASE_ERRORS as exc:
            if not self._unreachable:
                log.warning("%s: database unreachable, the work waits: %s", self.name, exc)
            self._unreachable = True
            return None
        if self._unreachable:
            log.info("%s: database reachable again", self.name)
            self._unreachable = False
        if taken is not None and taken.fresh:
            log.info("%s: this process does it now", self.name)
        return taken

    def forget(self) -> None:
        """The progress in memory is lost: the next take rebuilds it from the lease's row."""
        self.leases.forget(self.name)

    async def save(self, position: int | None, done: Iterable[int] = ()) -> bool:
        """Record the progress (and renew); False when the work is no longer this process's."""
        try:
            return await self.leases.save(self.name, position, list(done), self._now())
        except DATABASE_ERRORS as exc:
            log.debug("%s: could not record the progress: %s", self.name, exc)
            return self.held

    async def give_back(self) -> None:
        """Let the other process take the work at its next pass; never raises."""
        try:
            await self.leases.give_back(self.name, self._now())
        except Exception as exc:
            # It expires by itself; the other process only waits a little longer.
            log.warning("%s: could not give the work back (it expires by itself): %s", self.name, exc)
