"""The live run messages: one message per run in the staff log channel, posted when the run
starts and edited as it moves until it ends (a last edit showing how it ended, then left alone).

It follows the run log with a ``runner.sql.run_log.LogFollower`` (every line once, one committed
after a higher id too), as the staff log and the Events-tab mirror do, in a loop of its own
(``WakeableLoop``, nudged after every tick), so it never holds up a run; a Discord or database
error is logged once per run and kind and retried after a back-off, never raised into the loop. What a message shows is ``bridge.live.LiveView``, rendered by ``bot.cogs.live._render``.

Sign-ups: a run whose event has ``signup:`` shows its counts per option (seated of capacity, how
many wait). A join or a leave writes no run-log line, so each pass also reads the counts of the
runs whose message is open (one grouped query) and looks again at a run whose counts moved; a
click nudges the loop, so the process holding the lease sees its own clicks at once and another
process's at its next pass. The edit is coalesced like any other (``EDIT_GAP``).

Staying inside Discord's limits:

* **Coalesced.** A message is sent or edited at most once every ``EDIT_GAP`` seconds; changes in
  between give one edit, of the state at the moment it is sent. A render equal to the last one
  Discord accepted (its digest is stored) is never sent.
* **One budget per channel.** Every send and edit takes a slot from ``bot.channel_budget``, which
  the staff log and the announcements share: the channel never gets more than 5 per 5 s. The
  loop only starts an update while the channel has a slot free, and the runs updated least
  recently go first, so a busy run cannot starve a quiet one.

Choices where the issue is silent:

* **Which runs.** Every run that leaves ``scheduled`` (started by hand or by the schedule,
  rehearsals too), and a scheduled run the moment it is blocked by another run's concurrency key
  (staff want to see why it has not started). A run that ended without starting (missed, or
  cancelled while scheduled) gets none. Switched off by ``live_run_messages: false``.
* **How many.** At most ``MAX_OPEN`` (50) messages not yet showing an end at once: posting 500
  (a 500-scope start) would take the channel's whole budget for over eight minutes and bury
  every other line. A run over the cap gets its message when it next moves with a slot free;
  the staff log and ``/event status`` cover the rest.
* **Deleted.** A message someone deleted is posted again, at once (Discord's message-delete
  event) or at the next edit (its NotFound), and the new id stored; a message that already
  shows its run's end stays deleted.
* **Restarts.** The message id is in the database, so the next process edits the same message.
  A post is claimed in its row before it is sent; a process that died between the post and
  storing its id leaves the claim to expire, and the next post carries the same nonce, so
  Discord (within its dedupe window) answers with the message already posted: it is adopted.
* **Who posts.** Only the process that can see the staff channel (the one holding its guild),
  and of several that can, the one holding the ``live-run-messages`` lease (``bot.work_lease``).
  A process taking the lease over starts as a restart does: from now, with every open message
  and every run in flight that has none, so what moved while nobody held it is shown too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging

import discord

from bot.background import Background, LeasedLoop
from bot.cogs.live._render import digest, live_embed
from bot.errors import DATABASE_ERRORS
from bot.work_lease import WorkLease
from bridge.live import LiveMessagePosted, LiveMessages, LiveRow, LiveView, live_view
from runner.bus import LogGrew, SignupsChanged
from runner.sql.run_log import LogFollower

log = logging.getLogger(__name__)

# Seconds between two sends or edits of one message.
EDIT_GAP = 5.0
# Live messages that have not shown their run's end yet, at most.
MAX_OPEN = 50
# How long a claimed post may take before another process may post instead.
CLAIM_SECONDS = 60.0
# After a Discord or database error, a run's message is looked at again this much later.
RETRY_SECONDS = 30.0
# How soon to look again when the channel's budget is spent.
BUDGET_POLL = 1.0
NO_MENTIONS = discord.AllowedMentions.none()


def nonce_for(run_id: int, posts: int) -> str:
    """One nonce per message a run has had: a repeated post reuses it, a replacement does not."""
    return f"live{run_id}.{posts}"[:25]


class LiveRuns(LeasedLoop):
    work = "live-run-messages"
    # The run log grew; a sign-up list changed (the message shows its counts).
    wakes_on = (LogGrew, SignupsChanged)

    def __init__(self, kit: Background, *, lease: WorkLease, interval: float) -> None:
        super().__init__(kit, lease=lease, interval=interval)
        self.store = LiveMessages(kit.engine, kit.owner)
        # Where this process is in the run log (None: not known, the next pass starts it).
        self.follower: LogFollower | None = None
        # Runs to look at, each with the loop time from which to look (0: now).
        self.dirty: dict[int, float] = {}
        # Loop time of each run's last send or edit (what EDIT_GAP is measured from).
        self.sent_at: dict[int, float] = {}
        self.sends = 0
        # Each posted message's run, and the messages Discord said were deleted (by run).
        self._runs_of: dict[int, int] = {}
        self._deleted: dict[int, int] = {}
        self._open: int | None = None
        # The sign-up counts of each open message's run at the last pass (None: not read yet).
        self._signup_counts: dict[int, frozenset[tuple[str, str, int]]] | None = None

    def enabled(self) -> bool:
        return self.channel_id is not None

    @property
    def channel_id(self) -> int | None:
        config = self.kit.config
        if not config.live_run_messages or not config.staff_log_channel:
            return None
        return config.channel_id(config.staff_log_channel)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        """Someone deleted a live message: post it again now rather than at the run's next move."""
        run_id = self._runs_of.pop(payload.message_id, None)
        if run_id is None or payload.channel_id != self.channel_id:
            return
        self._deleted[run_id] = payload.message_id
        self.dirty[run_id] = 0.0
        self.look_again()

    def _now(self) -> float:
        # The event loop's clock, as the channel budget's: simulated time drives both.
        return asyncio.get_running_loop().time()

    async def prime(self) -> None:
        """Called before the ticker starts, so no line written after it is missed; a database
        that cannot be reached leaves it to the first pass."""
        if self.channel_id is None:
            return
        try:
            await self._prime()
        except DATABASE_ERRORS as exc:
            self.refusals.log_once("database", f"live run messages: database unreachable at start: {exc}")

    async def _prime(self) -> None:
        """Start from now, with every open message and every run in flight that has none."""
        follower = await self.store.follow_from_now()
        for run_id in await self.store.to_reconcile(MAX_OPEN * 4):
            self.dirty.setdefault(run_id, 0.0)
        self.follower = follower

    async def pass_once(self) -> float:
        """One pass (never raises): read which runs moved, and update the messages that may be."""
        interval = self.loop.interval
        channel_id = self.channel_id
        found = self.kit.client.get_channel(channel_id) if channel_id is not None else None
        # A channel kind that takes no messages (a category, a forum) is as good as not seen.
        channel = (
            found if isinstance(found, discord.TextChannel | discord.Thread | discord.VoiceChannel) else None
        )
        if channel is not None:
            assert self.lease is not None
            taken = await self.lease.take()
            if taken is None:
                # Another process posts and edits; what this one knew is stale when it takes over.
                self.follower = None
                self._signup_counts = None
                self.dirty.clear()
                return interval
            if taken.fresh:
                self.follower = None
        try:
            if self.follower is None:
                await self._prime()
            assert self.follower is not None
            changes = await self.store.changes(self.follower)
            signed_up = await self._signups_moved() if channel is not None else []
        except DATABASE_ERRORS as exc:
            self.refusals.log_once("database", f"live run messages: database unreachable: {exc}")
            return interval
        if channel is None:
            # Not this process's guild (or the channel is gone): the process that sees it posts.
            self.dirty.clear()
            return interval
        self._open = None
        now = self._now()
        for run_id in [*changes.run_ids, *signed_up]:
            self.dirty[run_id] = min(self.dirty.get(run_id, 0.0), now)
        delay = 0.0 if changes.more else interval
        # Least recently updated first, so every message gets its turn at the budget.
        for run_id in sorted(self.dirty, key=lambda r: (self.sent_at.get(r, float("-inf")), r)):
            now = self._now()
            ready_at = max(self.dirty[run_id], self.sent_at.get(run_id, float("-inf")) + EDIT_GAP)
            if ready_at > now:
                delay = min(delay, ready_at - now)
                continue
            if self.kit.budget.free(channel.id) <= 0:
                # The channel's budget is spent (by us or the staff log): try again shortly.
                delay = min(delay, BUDGET_POLL)
                break
            await self._update_guarded(channel, run_id)
        for run_id, ready_at in self.dirty.items():
            wait = max(ready_at, self.sent_at.get(run_id, float("-inf")) + EDIT_GAP) - self._now()
            # Ready now but not done: the budget ran out. Waking at once would only spin.
            delay = min(delay, wait if wait > 0 else BUDGET_POLL)
        return delay

    async def _signups_moved(self) -> list[int]:
        """The runs whose sign-up counts changed since the last pass. The first read after a
        start marks none: the start looks at every open message anyway."""
        before, counts = self._signup_counts, await self.store.signup_counts()
        self._signup_counts = counts
        if before is None:
            return []
        return sorted(r for r in before.keys() | counts.keys() if before.get(r) != counts.get(r))

    async def _update_guarded(self, channel: discord.abc.Messageable, run_id: int) -> None:
        try:
            done = await self.update(channel, run_id)
        except DATABASE_ERRORS as exc:
            self.refusals.log_once(
                (run_id, "database"), f"live message of run {run_id}: database unreachable: {exc}"
            )
            done = False
        except discord.HTTPException as exc:
            self.refusals.log_once(
                (run_id, f"http{exc.status}"),
                f"live message of run {run_id}: Discord refused it: {exc.status} {exc.text}",
            )
            done = False
        except Exception:
            if self.refusals.first_time((run_id, "error")):
                log.exception("live message of run %s: cannot update it", run_id, extra={"run_id": run_id})
            done = False
        if done:
            self.dirty.pop(run_id, None)
        else:
            self.dirty[run_id] = self._now() + RETRY_SECONDS

    async def update(self, channel: discord.abc.Messageable, run_id: int) -> bool:
        """Bring the run's message up to date: post it, edit it, or leave it. True when there is
        nothing left to do for it until the run moves again."""
        clock = self.kit.clock.now()
        row = await self.store.get(run_id)
        if row is not None and row.closed:
            return True
        if row is None and not await self.store.followable(run_id):
            return True  # not started (nor blocked): nothing to follow yet
        if row is None and await self._open_count() >= MAX_OPEN:
            # Checked before the run is read: a 500-scope start must not cost 450 renders.
            self.refusals.log_once(
                "cap", f"live run messages: {MAX_OPEN} are open; later runs get theirs as slots free"
            )
            return True
        view = await live_view(self.kit.engine, run_id, self.kit.versions, clock)
        if view is None:
            return True
        if row is not None and (message_id := row.message_id) is not None:
            if self._deleted.pop(run_id, None) == message_id:
                await self.store.forget(run_id, message_id, clock)
                row = dataclasses.replace(row, message_id=None)
            else:
                self._runs_of[message_id] = run_id
        embed = live_embed(view, self.kit.config.guild_id)
        rendered = digest(embed)
        if row is not None and row.message_id is not None:
            if row.digest == rendered:
                if view.ended:
                    await self.store.close(run_id, clock)
                return True
            if await self._edit(channel, row, embed, rendered, view):
                return True
        return await self._post(channel, run_id, embed, rendered, view)

    async def _open_count(self) -> int:
        """Messages not showing an end yet: read once a pass, then kept by this pass's posts."""
        if self._open is None:
            self._open = await self.store.count_open()
        return self._open

    async def _edit(
        self,
        channel: discord.abc.Messageable,
        row: LiveRow,
        embed: discord.Embed,
        rendered: str,
        view: LiveView,
    ) -> bool:
        """Edit the posted message; False when it is gone (someone deleted it)."""
        assert row.message_id is not None
        message = channel.get_partial_message(row.message_id)  # type: ignore[attr-defined]
        await self.kit.budget.take(row.channel_id)
        self._spent(row.run_id)
        try:
            await message.edit(embed=embed)
        except discord.NotFound:
            log.info("live message of run %s was deleted; posting a new one", row.run_id)
            await self.store.forget(row.run_id, row.message_id, self.kit.clock.now())
            return False
        await self.store.edited(row.run_id, row.message_id, rendered, view.ended, self.kit.clock.now())
        return True

    async def _post(
        self,
        channel: discord.abc.Messageable,
        run_id: int,
        embed: discord.Embed,
        rendered: str,
        view: LiveView,
    ) -> bool:
        clock = self.kit.clock.now()
        row = await self.store.claim(run_id, channel.id, clock, clock + dt.timedelta(seconds=CLAIM_SECONDS))  # type: ignore[attr-defined]
        if row is None:
            return True  # another process posts it (or has): it edits it too
        await self.kit.budget.take(row.channel_id)
        self._spent(run_id)
        try:
            message = await channel.send(
                embed=embed, nonce=nonce_for(run_id, row.posts), allowed_mentions=NO_MENTIONS
            )
        except discord.HTTPException:
            retry_at = self.kit.clock.now() + dt.timedelta(seconds=RETRY_SECONDS)
            await self.store.release(run_id, retry_at, self.kit.clock.now())
            raise
        self._runs_of[message.id] = run_id
        if self._open is not None and not view.ended and row.posts == 0:
            self._open += 1
        if not await self.store.posted(run_id, message.id, rendered, view.ended, self.kit.clock.now()):
            log.warning(
                "live message of run %s: its claim ran out while posting", run_id, extra={"run_id": run_id}
            )
        # The staff log holds a just-started run's lines until they can link this message.
        self.kit.bus.publish(LiveMessagePosted(run_id))
        return True

    def _spent(self, run_id: int) -> None:
        self.sends += 1
        self.sent_at[run_id] = self._now()
