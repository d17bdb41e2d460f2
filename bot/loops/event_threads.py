"""The event threads after their step: the run's confirmed attendees added, and the thread
archived when the run ends (completed, cancelled or failed).

A loop of its own (``WakeableLoop``, nudged after every tick), as the live run messages are, so
a refused or slow request never holds up a run; only the process holding the ``event-threads``
lease does it. What is done is in the database (``runner.threads``): an attendee added is
recorded, a thread archived is marked, so a restart neither repeats nor forgets. Both requests
are idempotent at Discord too, so one repeated after a crash between the answer and the record
changes nothing.

A thread that is gone (deleted by a moderator: 10003) is marked archived; an attendee who left
the server (10007) is marked added. Any other refusal is logged once and tried again a minute
later.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import discord

from bot.errors import DATABASE_ERRORS
from bot.loops.ticker import WakeableLoop
from runner import signups, threads
from runner.threads import RunThread

if TYPE_CHECKING:
    from bot.app import EventBot

log = logging.getLogger(__name__)

UNKNOWN_CHANNEL = 10003
UNKNOWN_MEMBER = 10007
UNKNOWN_USER = 10013
# After a refusal, that thread is left alone this long: a refusal repeated every pass would
# count against Discord's limit on invalid requests.
RETRY_SECONDS = 60.0


class EventThreads:
    def __init__(self, bot: EventBot, *, interval: float) -> None:
        self.bot = bot
        self.lease = bot.lease_for("event-threads")
        self.archived = 0
        self.added = 0
        self._reported: set[tuple[str, str]] = set()
        # Loop time before which a thread Discord refused something for is not tried again.
        self._not_before: dict[str, float] = {}
        self.loop = WakeableLoop(
            self.pass_once, interval=interval, name="eventbot-event-threads", before=self._ready
        )

    async def _ready(self) -> None:
        await self.bot.wait_until_ready()

    def start(self) -> None:
        self.loop.start()

    def cancel(self) -> None:
        self.loop.cancel()

    def nudge(self) -> None:
        self.loop.nudge()

    async def pass_once(self) -> float:
        """One pass (never raises)."""
        interval = self.loop.interval
        if await self.lease.take() is None:
            return interval
        engine, clock = self.bot.engine, self.bot.clock
        try:
            for thread in await threads.open_in_flight(engine):
                if thread.in_discord and self._may_try(thread):
                    await self._add_attendees(thread)
            for thread in await threads.to_archive(engine):
                if not thread.in_discord or (self._may_try(thread) and await self._archive(thread)):
                    await threads.archived(engine, thread, clock)
        except DATABASE_ERRORS as exc:
            self._report_once("database", "", f"event threads: database unreachable: {exc}")
        return interval

    async def _add_attendees(self, thread: RunThread) -> None:
        engine, clock = self.bot.engine, self.bot.clock
        confirmed = await signups.attendees(engine, thread.run_id)
        if not confirmed:
            return
        added = await threads.members_added(engine, thread.thread_id)
        for member_id in confirmed:
            if member_id in added:
                continue
            try:
                await self.bot.http.add_user_to_thread(int(thread.thread_id), int(member_id))
            except discord.HTTPException as exc:
                if exc.code not in (UNKNOWN_MEMBER, UNKNOWN_USER):
                    self._refused(thread, f"adding member {member_id}", exc)
                    return
            await threads.member_added(engine, thread.thread_id, member_id, clock)
            self.added += 1

    async def _archive(self, thread: RunThread) -> bool:
        """True when the thread is archived (or gone)."""
        try:
            await self.bot.http.edit_channel(int(thread.thread_id), archived=True)
        except discord.HTTPException as exc:
            if exc.code == UNKNOWN_CHANNEL:
                return True
            self._refused(thread, "archiving it", exc)
            return False
        self.archived += 1
        return True

    def _may_try(self, thread: RunThread) -> bool:
        return self._not_before.get(thread.thread_id, 0.0) <= asyncio.get_running_loop().time()

    def _refused(self, thread: RunThread, doing: str, exc: discord.HTTPException) -> None:
        self._not_before[thread.thread_id] = asyncio.get_running_loop().time() + RETRY_SECONDS
        self._report_once(
            thread.thread_id,
            doing,
            f"thread {thread.thread_id} of run {thread.run_id}: Discord refused {doing}: "
            f"{exc.status} (code {exc.code}) {exc.text}",
        )

    def _report_once(self, thread_id: str, key: str, message: str) -> None:
        if (thread_id, key) in self._reported:
            return
        self._reported.add((thread_id, key))
        log.warning("%s", message[:1900])
