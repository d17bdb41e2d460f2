"""Sign-up messages and promotion notices, in a loop of their own (``bot.background.LeasedLoop``,
woken by every change to a list and after every tick), under the ``signup-messages`` work lease
so one process posts.

* **Posted at booking.** A run in flight whose event's ``signup:`` names a ``channel`` gets its
  message there: its row is written (claimed) before the post, so two processes never post two,
  and a post repeated after a crash carries the same nonce, which Discord answers with the
  message already posted.
* **Or by a step.** A ``discord.signup`` step posts it through ``post_for_step`` (the Discord
  delivery calls it): the same row claimed first, the same message, the same nonce, so a run
  has one message whether the booking or the step (or a retry of it) got there first, and the
  loop edits it like any other.
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

import discord

from actions.delivery import DeliveryError, Posted, SignupPosted
from bot.background import Background, LeasedLoop
from bot.cogs.signups._departures import MemberDepartures
from bot.cogs.signups._dm import dm_or_mention
from bot.cogs.signups._view import NO_MENTIONS, digest, promoted_text, signup_embed, signup_view
from bot.work_lease import WorkLease
from bridge import signup_messages
from runner import signup_runs, signups
from runner.bus import LogGrew, SignupsChanged
from runner.signup_desk import SignupDesk
from runner.states import RUN_TERMINAL

log = logging.getLogger(__name__)


def signup_nonce(run_id: int) -> str:
    """A run's sign-up message nonce: the same for the booking's post and a step's, and for a
    repeat of either, so Discord answers a repeat with the message posted first."""
    return f"signup{run_id}"[:25]


# Seconds between two edits of one sign-up message.
EDIT_GAP = 5.0
BUDGET_POLL = 1.0


class SignupMessages(LeasedLoop):
    work = "signup-messages"
    # A tick books runs and ends them; a click, an import or a departure changes a list.
    wakes_on = (LogGrew, SignupsChanged)

    def __init__(self, kit: Background, desk: SignupDesk, *, lease: WorkLease, interval: float) -> None:
        super().__init__(kit, lease=lease, interval=interval)
        signup_runs.share_versions(kit.engine, kit.versions)
        # Runs up to this id were looked at for a message to post (new runs have higher ids).
        self.after_run_id = 0
        # Loop time of each message's last post or edit (what EDIT_GAP is measured from).
        self.sent_at: dict[int, float] = {}
        self.edits = 0
        # Members who left the server leave their lists; checked on this loop's passes.
        self.departures = MemberDepartures(kit, desk)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def lease_elsewhere(self) -> None:
        self.after_run_id = 0

    async def work_once(self) -> float:
        """Post, edit, notify; how long until the next pass."""
        await self._book()
        delay = await self._edit_all(self.loop.interval)
        await self.departures.check_some()
        await self._notify()
        return delay

    def _channel(self, ref: str) -> discord.abc.Messageable | None:
        alias = ref.removeprefix("#")
        channel_id = int(alias) if alias.isdigit() else self.kit.config.channel_id(alias)
        channel = self.kit.client.get_channel(channel_id) if channel_id is not None else None
        return channel if isinstance(channel, discord.abc.Messageable) else None

    async def _book(self) -> None:
        now = self.kit.clock.now()
        found, self.after_run_id = await signup_messages.runs_to_announce(
            self.kit.engine, self.after_run_id, now
        )
        for run_id, ref in found:
            channel = self._channel(ref)
            if channel is None:
                self.refusals.log_once(
                    f"channel:{ref}",
                    f"sign-ups: channel {ref!r} cannot be found; run {run_id} has no message",
                )
                continue
            channel_id = str(channel.id)  # type: ignore[attr-defined]
            if await signup_messages.claim_message(self.kit.engine, run_id, channel_id, self.kit.owner, now):
                await self._post_guarded(channel, run_id)
        for row in await signup_messages.reclaim_unposted(self.kit.engine, self.kit.owner, now):
            channel = self._channel(row.channel_id)
            if channel is not None:
                await self._post_guarded(channel, row.run_id)

    async def _post_guarded(self, channel: discord.abc.Messageable, run_id: int) -> None:
        try:
            await self._post(channel, run_id)
        except discord.HTTPException as exc:
            self.refusals.log_once(
                f"post:{run_id}",
                f"sign-up message of run {run_id}: Discord refused it: {exc.status} {exc.text}",
            )

    async def _render(self, run_id: int) -> tuple[discord.Embed, discord.ui.View, str, bool] | None:
        listed = await signups.listing(self.kit.engine, run_id)
        if listed is None:
            return None
        title = await signup_messages.event_title(self.kit.engine, run_id) or "event"
        now = self.kit.clock.now()
        embed, view = signup_embed(listed, title, now), signup_view(listed, now)
        over = listed.run_status in RUN_TERMINAL
        return embed, view, digest(embed, view), over

    async def _post(
        self, channel: discord.abc.Messageable, run_id: int, content: str | None = None
    ) -> discord.Message | None:
        rendered = await self._render(run_id)
        if rendered is None:
            return None
        embed, view, shown, _ = rendered
        await self.kit.budget.take(channel.id)  # type: ignore[attr-defined]
        self.sent_at[run_id] = self._now()
        message = await channel.send(
            content,
            embed=embed,
            view=view,
            nonce=signup_nonce(run_id),
            allowed_mentions=NO_MENTIONS,
        )
        await signup_messages.message_posted(
            self.kit.engine, run_id, str(message.id), shown, self.kit.clock.now()
        )
        return message

    async def post_for_step(
        self, channel: discord.abc.Messageable, run_id: int, step_id: int, content: str | None
    ) -> SignupPosted:
        """A ``discord.signup`` step's post: the run's message in ``channel`` with ``content``
        above it, unless the run has its message already (then that one); or, when the booking
        claimed the row and died, in the booking's channel. Raises ``discord.HTTPException``
        as Discord refuses; a claim another poster holds is ``DeliveryError`` transient."""
        engine = self.kit.engine
        claimer = f"step {step_id}"
        state, row = await signup_messages.claim_for_step(
            engine,
            run_id,
            str(channel.id),  # type: ignore[attr-defined]
            claimer,
            self.kit.clock.now(),
        )
        if state is signup_messages.StepClaim.POSTED:
            assert row.message_id is not None
            return SignupPosted(self._where(row.channel_id, row.message_id), created=False)
        if state is signup_messages.StepClaim.BUSY:
            raise DeliveryError(
                f"run {run_id}'s sign-up message is being posted by another process", transient=True
            )
        target = channel if row.channel_id == str(channel.id) else self._channel(row.channel_id)  # type: ignore[attr-defined]
        if target is None:
            raise DeliveryError(
                f"the sign-up message's channel {row.channel_id} cannot be found", transient=False
            )
        message = await self._post(target, run_id, content)
        if message is None:
            raise DeliveryError(f"run {run_id} has no sign-up (its event's signup: is gone)", transient=False)
        # The message is up: its list is shown as it is now, not at the next pass.
        self.kit.bus.publish(SignupsChanged(run_id))
        return SignupPosted(self._where(row.channel_id, str(message.id)), created=True)

    def _where(self, channel_id: str, message_id: str) -> Posted:
        channel = self._channel(channel_id)
        return Posted(channel_id, message_id, getattr(channel, "name", None))

    async def _edit_all(self, interval: float) -> float:
        delay = interval
        for row in await signup_messages.open_messages(self.kit.engine):
            wait = self.sent_at.get(row.run_id, float("-inf")) + EDIT_GAP - self._now()
            rendered = await self._render(row.run_id)
            if rendered is None:
                continue
            embed, view, shown, over = rendered
            if shown == row.digest:
                if over:
                    await signup_messages.message_shown(
                        self.kit.engine, row.run_id, shown, self.kit.clock.now(), closed=True
                    )
                continue
            if wait > 0:
                delay = min(delay, wait)
                continue
            channel = self._channel(row.channel_id)
            if channel is None or row.message_id is None:
                continue
            if self.kit.budget.free(channel.id) <= 0:  # type: ignore[attr-defined]
                delay = min(delay, BUDGET_POLL)
                continue
            await self.kit.budget.take(channel.id)  # type: ignore[attr-defined]
            self.sent_at[row.run_id] = self._now()
            try:
                await channel.get_partial_message(int(row.message_id)).edit(embed=embed, view=view)  # type: ignore[attr-defined]
            except discord.HTTPException as exc:
                self.refusals.log_once(
                    f"edit:{row.run_id}",
                    f"sign-up message of run {row.run_id}: Discord refused the edit: {exc.status} {exc.text}",
                )
                continue
            self.edits += 1
            await signup_messages.message_shown(
                self.kit.engine, row.run_id, shown, self.kit.clock.now(), closed=over
            )
        return delay

    async def _notify(self) -> None:
        now = self.kit.clock.now()
        for notice in await signup_messages.claim_notices(self.kit.engine, self.kit.owner, now):
            via, error = await self._deliver(notice)
            await signup_messages.settle_notice(
                self.kit.engine, notice, self.kit.owner, self.kit.clock.now(), via=via, error=error
            )

    async def _deliver(self, notice: signup_messages.Notice) -> tuple[str | None, str | None]:
        listed = await signups.listing(self.kit.engine, notice.run_id)
        title = await signup_messages.event_title(self.kit.engine, notice.run_id) or "the event"
        text = promoted_text(title, notice.option, listed.starts_at if listed else None)
        # A notice told again after a crash carries the same nonce: Discord answers with the first.
        nonce = f"notice{notice.id}"[:25]
        return await dm_or_mention(self.kit, notice.run_id, int(notice.member_id), text, nonce=nonce)
