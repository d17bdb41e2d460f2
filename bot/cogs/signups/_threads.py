"""The event threads after their step: kept to the run's confirmed attendees (added as they
confirm, taken out when they leave or move to the waiting list) and archived when the run ends
(completed, cancelled or failed).

A loop of its own (``bot.background.LeasedLoop``, woken after every tick and sign-up change), as the live run messages are, so
a refused or slow request never holds up a run; only the process holding the ``event-threads``
lease does it. What is done is in the database (``bridge.threads``): an attendee added is
recorded, one taken out is unrecorded, a thread archived is marked, so a restart neither repeats
nor forgets. The requests are idempotent at Discord too, so one repeated after a crash between
the answer and the record changes nothing. Only members the bot added are taken out, and only
while the run is in flight: at the end the thread is archived with everyone still in it.

A thread that is gone (deleted by a moderator: 10003) is marked archived, whichever request
found it gone; an attendee who left the server (10007) is marked added, or taken out. Any other
refusal (taking a member out needs Manage Threads) is logged once and tried again a minute
later, for that kind of request only: a refused removal does not hold up the next attendee.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import discord

from bot import discord_rest
from bot.background import Background, LeasedLoop
from bot.work_lease import WorkLease
from bridge import threads
from bridge.threads import RunThread
from runner.bus import LogGrew, SignupsChanged

log = logging.getLogger(__name__)

UNKNOWN_CHANNEL = 10003
UNKNOWN_MEMBER = 10007
UNKNOWN_USER = 10013
MISSING_PERMISSIONS = 50013
# After a refusal, that request on that thread is left alone this long: a refusal repeated every
# pass would count against Discord's limit on invalid requests.
RETRY_SECONDS = 60.0
# Answers that no repeat will change (Discord counts them toward its IP ban).
FINAL_STATUSES = frozenset({401, 403})
ADDING, REMOVING, ARCHIVING = "add", "remove", "archive"


class ThreadGone(Exception):
    """Discord answered 10003 for the thread: a moderator deleted it."""


class EventThreads(LeasedLoop):
    work = "event-threads"
    wakes_on = (LogGrew, SignupsChanged)

    def __init__(self, kit: Background, *, lease: WorkLease, interval: float) -> None:
        super().__init__(kit, lease=lease, interval=interval)
        self.archived = 0
        self.added = 0
        self.removed = 0

    async def work_once(self) -> None:
        engine, clock = self.kit.engine, self.kit.clock
        for thread in await threads.open_in_flight(engine):
            if thread.in_discord:
                try:
                    await self._reconcile_members(thread)
                except ThreadGone:
                    await threads.archived(engine, thread, clock)
        for thread in await threads.to_archive(engine):
            if not thread.in_discord or (
                self.refusals.may_try((thread.thread_id, ARCHIVING)) and await self._archive(thread)
            ):
                await threads.archived(engine, thread, clock)

    async def _reconcile_members(self, thread: RunThread) -> None:
        """Adds the confirmed not yet added, then takes out those added who no longer hold a seat."""
        engine, clock = self.kit.engine, self.kit.clock
        todo = await threads.membership_changes(engine, thread)
        if todo.add and self.refusals.may_try((thread.thread_id, ADDING)):
            for member_id in todo.add:
                if not await self._ask(
                    thread, ADDING, f"adding member {member_id}", discord_rest.add_to_thread, member_id
                ):
                    break
                await threads.member_added(engine, thread.thread_id, member_id, clock)
                self.added += 1
        if todo.remove and self.refusals.may_try((thread.thread_id, REMOVING)):
            for member_id in todo.remove:
                if not await self._ask(
                    thread,
                    REMOVING,
                    f"taking member {member_id} out",
                    discord_rest.remove_from_thread,
                    member_id,
                ):
                    break
                await threads.member_removed(engine, thread.thread_id, member_id)
                self.removed += 1

    async def _ask(
        self,
        thread: RunThread,
        kind: str,
        doing: str,
        request: Callable[[discord.Client, str, str], Awaitable[None]],
        member_id: str,
    ) -> bool:
        """True when Discord did it, or the member is no longer on the server (nothing to do);
        raises ``ThreadGone`` when the thread is."""
        try:
            await request(self.kit.client, thread.thread_id, member_id)
        except discord.HTTPException as exc:
            if exc.code in (UNKNOWN_MEMBER, UNKNOWN_USER):
                return True
            if exc.code == UNKNOWN_CHANNEL:
                raise ThreadGone from exc
            self._refused(thread, kind, doing, exc)
            return False
        return True

    async def _archive(self, thread: RunThread) -> bool:
        """True when the thread is archived (or gone)."""
        try:
            await discord_rest.archive_thread(self.kit.client, thread.thread_id)
        except discord.HTTPException as exc:
            if exc.code == UNKNOWN_CHANNEL:
                return True
            self._refused(thread, ARCHIVING, "archiving it", exc)
            return False
        self.archived += 1
        return True

    def _refused(self, thread: RunThread, kind: str, doing: str, exc: discord.HTTPException) -> None:
        # A missing permission or access (403: 50001, 50013) is final for that thread and kind of
        # request: asked again every minute it only collects invalid requests until Discord bans
        # the IP; staff are told once, and a restart (after fixing the permission) tries again.
        final = exc.status in FINAL_STATUSES
        self.refusals.refused((thread.thread_id, kind), wait=RETRY_SECONDS, final=final)
        if final:
            self.refusals.tell_once(
                (thread.thread_id, kind, "final"),
                f"Run {thread.run_id}'s event thread: Discord refused {doing} ({exc.status}, code "
                f"{exc.code}); the bot stops asking until it restarts (check its permissions there).",
            )
        hint = (
            " (the bot needs Manage Threads in the thread's channel to take members out)"
            if kind == REMOVING and exc.code == MISSING_PERMISSIONS
            else ""
        )
        self.refusals.log_once(
            (thread.thread_id, doing),
            f"thread {thread.thread_id} of run {thread.run_id}: Discord refused {doing}: "
            f"{exc.status} (code {exc.code}) {exc.text}{hint}",
        )
