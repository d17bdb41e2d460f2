"""The bot's background work: one shape for every loop that follows the database.

Each loop (the staff log, the live messages, the Events tab, the sign-up messages, the event
threads, the attendee roles, the Interested import, the reminders to attendees by DM) is a
``LeasedLoop``: an ``ext.tasks`` loop
that wakes at its interval or when something it follows is published on the runner's bus
(``runner.bus``), and that does its pass only while this process holds the work's lease
(``bot.work_lease``), so two bot processes on one database never do it twice. The loop is
handed its collaborators (``Background``), not the whole bot: it needs a Discord client, the
config, the store and the bus, nothing else.

Waking is subscription, not calls: a loop names the events it follows (``wakes_on``) and
subscribes in its constructor, as APScheduler 4's loops subscribe to their event broker. Who
changes something publishes after the commit (the controls ``RunsChanged``, the tick and a drive
``LogGrew``, the sign-up desk ``SignupsChanged``) and does not know who follows.

``Refusals`` is the one bookkeeping for what Discord refused: a request kind that failed is not
asked again before its wait is over (for ever, for a final answer), and each kind of trouble is
logged (and told to staff) once, again only after it cleared.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import discord
from discord.ext import tasks
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.channel_budget import ChannelBudget
from bot.work_lease import WorkLease
from runner.bus import Event, LocalEventBus, StaffNotice, Subscription
from runner.catalog import VersionCache
from runner.clock import Clock
from runner.db import DATABASE_ERRORS
from wiring.config import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Background:
    """What a background loop works with. ``client``: the guild, channels and REST requests;
    ``budget``: every send or edit to a channel takes a slot first (5 per 5 s per channel);
    ``owner``: this process's name in the database's leases and claims."""

    client: discord.Client
    config: Config
    engine: AsyncEngine
    versions: VersionCache
    clock: Clock
    bus: LocalEventBus
    budget: ChannelBudget
    owner: str

    def guild(self) -> discord.Guild | None:
        """This process's guild, when the gateway has it."""
        guild_id = self.config.guild_id
        return self.client.get_guild(guild_id) if guild_id is not None else None

    def tell_staff(self, text: str) -> None:
        """A line for the staff log channel that is not in the run log."""
        self.bus.publish(StaffNotice(text))


class WakeableLoop:
    """An ``ext.tasks`` loop whose body answers how long to sleep, and that ``wake()`` wakes.

    * The loop sleeps in one place, its own ``ext.tasks`` sleep; each pass moves that wake-up
      to "``delay`` seconds from now" with ``change_interval``.
    * A wake while the loop sleeps runs the body at once in a task of its own, then moves the
      sleeping loop's wake-up the same way; a wake while the body runs makes the body run again
      before it sleeps.
    * The body must not raise; if it does anyway, the error is logged and the loop sleeps its
      interval (it is never allowed to reach ``ext.tasks``, which would stop the loop, #2151).
    """

    # Back-to-back passes (woken again while running) before the loop sleeps anyway.
    MAX_PASSES = 20

    def __init__(
        self,
        body: Callable[[], Awaitable[float]],
        *,
        interval: float,
        name: str,
        before: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.interval = interval
        self.name = name
        self._body = body
        self._woken_up = False
        self._lock = asyncio.Lock()
        self._ready = False
        self._wake: asyncio.Task[None] | None = None
        self.task: tasks.Loop[Callable[[], Coroutine[Any, Any, None]]] = tasks.loop(
            seconds=interval, name=name
        )(self._iteration)
        if before is not None:
            self.task.before_loop(before)

    def start(self) -> None:
        if not self.task.is_running():
            self.task.start()

    async def stop(self) -> None:
        """Cancel the loop and wait until its pass has let go of what it held (a database
        connection returned to the pool rather than collected mid-query)."""
        running = [t for t in (self.task.get_task(), self._wake) if t is not None and not t.done()]
        self.task.cancel()
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    def cancel(self) -> None:
        """Cancel at once, without waiting (a process that dies; tests simulate one)."""
        self.task.cancel()
        if self._wake is not None:
            self._wake.cancel()

    def is_running(self) -> bool:
        return self.task.is_running()

    def wake(self) -> None:
        """Run the body again as soon as possible."""
        self._woken_up = True
        if not (self._ready and self.task.is_running()) or self._lock.locked():
            return  # not started yet (its first pass is at start), or running: it sees the flag
        if self._wake is None or self._wake.done():
            self._wake = asyncio.create_task(self._woken(), name=f"{self.name}-wake")

    async def _iteration(self) -> None:
        self._ready = True
        async with self._lock:
            delay = await self._passes()
        self._sleep(delay)

    async def _woken(self) -> None:
        async with self._lock:
            delay = await self._passes()
        if self.task.is_running():
            self._sleep(delay)

    async def _passes(self) -> float:
        delay = self.interval
        for _ in range(self.MAX_PASSES):
            self._woken_up = False
            try:
                delay = await self._body()
            except Exception:
                log.exception("%s: unexpected error; the loop carries on", self.name)
                delay = self.interval
            if not self._woken_up:
                return delay
        return delay

    def _sleep(self, seconds: float) -> None:
        """Wake ``seconds`` from now.

        A relative ``ext.tasks`` loop wakes at ``last_iteration + interval``, where
        ``last_iteration`` is when its current pass was due; ``next_iteration - interval`` is that
        instant, so the interval is set to what lands the wake-up ``seconds`` from now. (While the
        loop sleeps, ``change_interval`` moves the pending wake-up too.)"""
        upcoming = self.task.next_iteration
        if upcoming is None:
            return
        started = upcoming - dt.timedelta(seconds=self.task.seconds or 0.0)
        target = discord.utils.utcnow() + dt.timedelta(seconds=seconds)
        self.task.change_interval(seconds=max((target - started).total_seconds(), 0.001))


class LeasedLoop:
    """Background work one process does at a time, woken by the events it follows.

    A subclass sets ``work`` (the lease's name, also the loop's) and ``wakes_on``, and writes
    ``work_once`` (answers how long to sleep, or None for the interval). ``enabled`` says whether
    this process has the work at all (a live-message loop with no channel configured does not
    start). A database that cannot be reached is logged once per outage; the loop carries on.
    """

    work: ClassVar[str]
    wakes_on: ClassVar[tuple[type[Event], ...]] = ()

    def __init__(self, kit: Background, *, lease: WorkLease | None, interval: float) -> None:
        self.kit = kit
        # None: a test's bare client, the only process (no lease to take).
        self.lease = lease
        self.loop = WakeableLoop(
            self.pass_once, interval=interval, name=f"eventbot-{self.work}", before=self._ready
        )
        self.refusals = Refusals(self.work, kit)
        self._subscription: Subscription | None = (
            kit.bus.subscribe(self._follow, self.wakes_on) if self.wakes_on else None
        )

    async def _ready(self) -> None:
        await self.kit.client.wait_until_ready()

    def _follow(self, event: Event) -> None:
        if self.enabled():
            self.loop.wake()

    def enabled(self) -> bool:
        return True

    def look_again(self) -> None:
        """Pass again now, for a reason of the loop's own (a Discord gateway event it listens
        to); what others change reaches it through the bus."""
        if self.enabled():
            self.loop.wake()

    def start(self) -> None:
        if self.enabled():
            self.loop.start()

    async def stop(self) -> None:
        """Stop following and passing, and hand the lease to the other process, if any."""
        if self._subscription is not None:
            self._subscription.unsubscribe()
            self._subscription = None
        await self.loop.stop()
        if self.lease is not None:
            await self.lease.give_back()

    async def pass_once(self) -> float:
        """One pass (never raises): the work, if this process holds it now."""
        interval = self.loop.interval
        if self.lease is not None and await self.lease.take() is None:
            self.lease_elsewhere()
            return interval
        try:
            delay = await self.work_once()
        except DATABASE_ERRORS as exc:
            self.refusals.log_once("database", f"{self.work}: database unreachable: {exc}")
            return interval
        self.refusals.cleared("database")
        return interval if delay is None else delay

    def lease_elsewhere(self) -> None:
        """Another process does the work now: what this one knew of it may go stale."""

    async def work_once(self) -> float | None:
        raise NotImplementedError


class Refusals:
    """What Discord refused, per key (a thread and a kind of request, a role, a run, ...):
    ``may_try`` is false until the key's wait is over; ``refused`` starts it (``final``: for as
    long as the process lives); ``log_once`` and ``tell_once`` say a thing once per key until
    ``cleared``."""

    def __init__(self, name: str, kit: Background) -> None:
        self.name = name
        self.kit = kit
        self._not_before: dict[Hashable, float] = {}
        self._said: set[Hashable] = set()

    def _now(self) -> float:
        return self.kit.clock.now().timestamp()

    def may_try(self, key: Hashable) -> bool:
        return self._not_before.get(key, -math.inf) <= self._now()

    def refused(self, key: Hashable, *, wait: float, final: bool = False) -> None:
        self._not_before[key] = math.inf if final else self._now() + wait

    def done(self, key: Hashable) -> None:
        self._not_before.pop(key, None)

    def first_time(self, key: Hashable) -> bool:
        """True the first time ``key`` is asked about (again once ``cleared``)."""
        if key in self._said:
            return False
        self._said.add(key)
        return True

    def log_once(self, key: Hashable, message: str) -> bool:
        """Log ``message`` unless ``key`` was said already; True when it was logged now."""
        if not self.first_time(key):
            return False
        log.warning("%s", message[:1900])
        return True

    def tell_once(self, key: Hashable, message: str) -> bool:
        """Log ``message`` and post it to the staff log, once per ``key``."""
        if not self.log_once(key, message):
            return False
        self.kit.tell_staff(f"⚠️ {message}")
        return True

    def cleared(self, key: Hashable) -> None:
        """The trouble behind ``key`` is over: said again if it recurs."""
        self._said.discard(key)
