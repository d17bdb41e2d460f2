"""Sign-up messages and promotion notices, in a loop of their own (``WakeableLoop``, nudged by
every click and after every tick), under the ``signup-messages`` work lease so one process posts.

* **Posted at booking.** A run in flight whose event's ``signup:`` names a ``channel`` gets its
  message there: its row is written (claimed) before the post, so two processes never post two,
  and a post repeated after a crash carries the same nonce, which Discord answers with the
  message already posted.
* **Edits coalesced.** A message is edited at most once every ``EDIT_GAP`` seconds, showing the
  list as it is when the edit is sent (so 50 clicks in 2 s are one or two edits), never when it
  would show what it already shows (a digest is stored), and each edit takes a slot from the
  channel's budget (``bot.channel_budget``) first. Past the closing time the option buttons are
  disabled; once the run is over the message is edited a last time and left alone.
* **Notices.** Each promotion's outbox row (``runner.signups``) is claimed, the member is sent a
  direct message, and when their DMs are closed (Discord's 50007) they are mentioned in the
  sign-up message's channel instead; the row is then marked delivered, once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import discord

from bot.errors import DATABASE_ERRORS
from bot.loops.ticker import WakeableLoop
from bot.signup_view import NO_MENTIONS, digest, promoted_text, signup_embed, signup_view
from runner import signups
from runner.states import RUN_TERMINAL

if TYPE_CHECKING:
    from bot.app import EventBot

log = logging.getLogger(__name__)

# Seconds between two edits of one sign-up message.
EDIT_GAP = 5.0
BUDGET_POLL = 1.0
CANNOT_DM = 50007


class SignupMessages:
    def __init__(self, bot: EventBot, *, interval: float) -> None:
        self.bot = bot
        self.owner = bot.services.runner.owner
        signups.share_versions(bot.engine, bot.services.versions)
        self.lease = bot.lease_for("signup-messages")
        self.loop = WakeableLoop(
            self.pass_once, interval=interval, name="eventbot-signups", before=self._ready
        )
        # Runs up to this id were looked at for a message to post (new runs have higher ids).
        self.after_run_id = 0
        # Loop time of each message's last post or edit (what EDIT_GAP is measured from).
        self.sent_at: dict[int, float] = {}
        self.edits = 0
        self._reported: set[str] = set()

    def start(self) -> None:
        self.loop.start()

    def cancel(self) -> None:
        self.loop.cancel()

    def nudge(self) -> None:
        self.loop.nudge()

    async def _ready(self) -> None:
        await self.bot.wait_until_ready()

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def pass_once(self) -> float:
        """One pass (never raises): post, edit, notify; how long until the next."""
        interval = self.loop.interval
        taken = await self.lease.take()
        if taken is None:
            self.after_run_id = 0
            return interval
        try:
            await self._book()
            delay = await self._edit_all(interval)
            await self._notify()
        except DATABASE_ERRORS as exc:
            self._report("database", f"sign-ups: database unreachable: {exc}")
            return interval
        return delay

    def _channel(self, ref: str) -> discord.abc.Messageable | None:
        alias = ref.removeprefix("#")
        channel_id = int(alias) if alias.isdigit() else self.bot.config.channel_id(alias)
        channel = self.bot.get_channel(channel_id) if channel_id is not None else None
        return channel if isinstance(channel, discord.abc.Messageable) else None

    async def _book(self) -> None:
        now = self.bot.clock.now()
        found, self.after_run_id = await signups.runs_to_announce(self.bot.engine, self.after_run_id)
        for run_id, ref in found:
            channel = self._channel(ref)
            if channel is None:
                self._report(
                    f"channel:{ref}",
                    f"sign-ups: channel {ref!r} cannot be found; run {run_id} has no message",
                )
                continue
            if await signups.claim_message(self.bot.engine, run_id, str(channel.id), self.owner, now):  # type: ignore[attr-defined]
                await self._post_guarded(channel, run_id)
        for row in await signups.reclaim_unposted(self.bot.engine, self.owner, now):
            channel = self._channel(row.channel_id)
            if channel is not None:
                await self._post_guarded(channel, row.run_id)

    async def _post_guarded(self, channel: discord.abc.Messageable, run_id: int) -> None:
        try:
            await self._post(channel, run_id)
        except discord.HTTPException as exc:
            self._report(
                f"post:{run_id}",
                f"sign-up message of run {run_id}: Discord refused it: {exc.status} {exc.text}",
            )

    async def _render(self, run_id: int) -> tuple[discord.Embed, discord.ui.View, str, bool] | None:
        listed = await signups.listing(self.bot.engine, run_id)
        if listed is None:
            return None
        title = await signups.event_title(self.bot.engine, run_id) or "event"
        now = self.bot.clock.now()
        embed, view = signup_embed(listed, title, now), signup_view(listed, now)
        over = listed.run_status in RUN_TERMINAL
        return embed, view, digest(embed, view), over

    async def _post(self, channel: discord.abc.Messageable, run_id: int) -> None:
        rendered = await self._render(run_id)
        if rendered is None:
            return
        embed, view, shown, _ = rendered
        await self.bot.channel_budget.take(channel.id)  # type: ignore[attr-defined]
        self.sent_at[run_id] = self._now()
        message = await channel.send(
            embed=embed, view=view, nonce=f"signup{run_id}"[:25], allowed_mentions=NO_MENTIONS
        )
        await signups.message_posted(self.bot.engine, run_id, str(message.id), shown, self.bot.clock.now())

    async def _edit_all(self, interval: float) -> float:
        delay = interval
        for row in await signups.open_messages(self.bot.engine):
            wait = self.sent_at.get(row.run_id, float("-inf")) + EDIT_GAP - self._now()
            rendered = await self._render(row.run_id)
            if rendered is None:
                continue
            embed, view, shown, over = rendered
            if shown == row.digest:
                if over:
                    await signups.message_shown(
                        self.bot.engine, row.run_id, shown, self.bot.clock.now(), closed=True
                    )
                continue
            if wait > 0:
                delay = min(delay, wait)
                continue
            channel = self._channel(row.channel_id)
            if channel is None or row.message_id is None:
                continue
            if self.bot.channel_budget.free(channel.id) <= 0:  # type: ignore[attr-defined]
                delay = min(delay, BUDGET_POLL)
                continue
            await self.bot.channel_budget.take(channel.id)  # type: ignore[attr-defined]
            self.sent_at[row.run_id] = self._now()
            try:
                await channel.get_partial_message(int(row.message_id)).edit(embed=embed, view=view)  # type: ignore[attr-defined]
            except discord.HTTPException as exc:
                self._report(
                    f"edit:{row.run_id}",
                    f"sign-up message of run {row.run_id}: Discord refused the edit: {exc.status} {exc.text}",
                )
                continue
            self.edits += 1
            await signups.message_shown(self.bot.engine, row.run_id, shown, self.bot.clock.now(), closed=over)
        return delay

    async def _notify(self) -> None:
        now = self.bot.clock.now()
        for notice in await signups.claim_notices(self.bot.engine, self.owner, now):
            via, error = await self._deliver(notice)
            await signups.settle_notice(
                self.bot.engine, notice, self.owner, self.bot.clock.now(), via=via, error=error
            )

    async def _deliver(self, notice: signups.Notice) -> tuple[str | None, str | None]:
        listed = await signups.listing(self.bot.engine, notice.run_id)
        title = await signups.event_title(self.bot.engine, notice.run_id) or "the event"
        text = promoted_text(title, notice.option, listed.starts_at if listed else None)
        member_id = int(notice.member_id)
        try:
            user = self.bot.get_user(member_id) or await self.bot.fetch_user(member_id)
            await user.send(text, allowed_mentions=NO_MENTIONS)
            return "dm", None
        except discord.Forbidden as exc:
            if exc.code != CANNOT_DM:
                return None, f"Discord refused the DM: {exc.status} {exc.text}"[:500]
        except discord.HTTPException as exc:
            return None, f"Discord refused the DM: {exc.status} {exc.text}"[:500]
        # Their DMs are closed: a mention where the sign-up is, which pings them alone.
        message = await signups.message_of(self.bot.engine, notice.run_id)
        channel = self._channel(message.channel_id) if message is not None else None
        if channel is None:
            return None, "their DMs are closed and the sign-up message's channel cannot be found"
        try:
            await self.bot.channel_budget.take(channel.id)  # type: ignore[attr-defined]
            await channel.send(
                f"<@{member_id}> {text}",
                allowed_mentions=discord.AllowedMentions(
                    users=[discord.Object(member_id)], roles=False, everyone=False
                ),
            )
        except discord.HTTPException as exc:
            return None, f"Discord refused the mention: {exc.status} {exc.text}"[:500]
        return "mention", None

    def _report(self, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            log.warning("%s", message[:1900])
