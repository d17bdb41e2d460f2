"""The Discord implementation of ``actions.delivery.Delivery``.

* **Where**: a step names a channel by alias (``channels`` in config) or id; a GM cue defaults
  to ``gm_channel``. A rehearsal run's messages all go to ``sandbox_channel``, marked
  ``[REHEARSAL]`` with every ping suppressed; with no sandbox configured a rehearsal posts
  nothing (terminal), never to a live channel. A channel outside the configured guild is refused.
* **Mentions are locked down** on every message, by the one policy in ``actions.mentions`` (the
  rehearsal's console applies the same): ``allowed_mentions`` names only the roles in
  ``announce.allowed_ping_roles`` (a GM cue: its own ping role), never users but the
  attendees a cue with ``ping: attendees`` mentions (at most 100, Discord's limit), and
  ``@everyone`` / ``@here`` only when ``announce.allow_everyone`` says so. A ping the config does
  not allow is shown inert rather than refused at delivery; preflight reports it before the run.
* **At most once**: the step's idempotency key becomes the message ``nonce``. discord.py sends
  ``enforce_nonce: true`` with any nonce, so Discord itself returns the first message for a
  repeat within its dedupe window (a few minutes) instead of posting twice. Discord caps a nonce
  at 25 characters; the key is 40 hex characters drawn at random, so its first 25 (100 bits) are
  still unique for any number of steps this bot will ever see.
* **Errors are classified**: rate limits, 5xx, timeouts and dropped connections are transient
  (the runner retries with the same nonce); missing access or permissions, an unknown channel and
  any other 4xx are terminal, with a message naming the channel and what is missing.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import aiohttp
import discord

from actions import limits, mentions
from actions.delivery import (
    Announcement,
    Cue,
    DeliveryError,
    Posted,
    SignupPost,
    SignupPosted,
    StartedThread,
    ThreadRequest,
)
from actions.mentions import Mentions, PingPolicy
from actions.messaging import Describe
from bot.channel_budget import ChannelBudget
from bot.cogs.approvals._render import approval_message
from bot.cogs.cues._render import cue_embed, cue_view, mark_settled, settled_text
from bot.cogs.reminders._queue import QueuesAttendeeDms
from bot.cogs.signups._role_checks import attendee_role_problems
from bot.discord_messages import (
    EVERYONE,
    SEND,
    THREAD,
    THREAD_ALREADY_CREATED,
    allowed_mentions,
    build_embed,
    channel_label,
    forbidden_text,
    missing_permissions,
    nonce_for,
    permission_name,
    transient_status,
)
from bot.rendering import REHEARSAL_MARK, clip, person
from runner.approvals import ApprovalRequest
from runner.controls import CueRef
from runner.history import RunEnding
from runner.states import ActionOutcome, StepStatus
from runner.views import StepContext
from wiring.config import Config
from wiring.control_text import closed_cue_text

log = logging.getLogger(__name__)


class SignupPoster(Protocol):
    async def post_for_step(
        self, channel: Any, run_id: int, step_id: int, content: str | None
    ) -> SignupPosted: ...


class DiscordDelivery(QueuesAttendeeDms):
    def __init__(
        self,
        bot: discord.Client,
        config: Config,
        describe: Describe | None = None,
        budget: ChannelBudget | None = None,
    ) -> None:
        self.bot = bot
        self.config = config
        self.describe = describe
        # Shared with the staff log and the live run messages: one channel, one budget.
        self.budget = budget or ChannelBudget()
        # Who posts a ``discord.signup`` step's message: the sign-up loop (``bot.app`` sets it).
        self.signup_poster: SignupPoster | None = None

    # ── Delivery ──────────────────────────────────────────────────────────

    async def announce(self, announcement: Announcement) -> Posted:
        rehearsal = bool(announcement.context and announcement.context.rehearsal)
        channel = await self._channel(announcement.channel, rehearsal=rehearsal)
        decision = self._decide(announcement, rehearsal)
        content = decision.text(markup=True)
        embed = build_embed(announcement.embed) if announcement.embed else None
        if rehearsal:
            content = clip(f"{REHEARSAL_MARK} {content or ''}".strip(), limits.CONTENT_MAX)
        message = await self._send(
            announcement, channel, content=content, embed=embed, allowed_mentions=allowed_mentions(decision)
        )
        return Posted(str(channel.id), str(message.id), getattr(channel, "name", None))

    async def post_cue(self, cue: Cue) -> Posted:
        rehearsal = bool(cue.context and cue.context.rehearsal)
        channel = await self._channel(self._cue_channel_ref(cue), rehearsal=rehearsal)
        decision = self._decide(cue, rehearsal)
        content = decision.text(markup=True)
        if rehearsal:
            content = f"{REHEARSAL_MARK} {content or ''}".strip()
        message = await self._send(
            cue,
            channel,
            content=content,
            embed=cue_embed(cue),
            allowed_mentions=allowed_mentions(decision),
            view=cue_view(cue.step_id, attendance_of=cue.run_id if cue.attendance else None),
        )
        return Posted(str(channel.id), str(message.id), getattr(channel, "name", None))

    async def close_cue(self, run_id: int, step_id: int, posted: Posted, ended: RunEnding) -> None:
        """The cue went out, but its run ended meanwhile: disable its buttons and say why, so no
        GM presses Confirm on a run that is over."""
        ref = CueRef(step_id, run_id, StepStatus.CANCELLED, {"posted": posted.as_dict()})
        await mark_settled(
            self.bot, (ref,), settled_text(StepStatus.CANCELLED, None, reason=closed_cue_text(ended, person))
        )

    async def post_approval(self, request: ApprovalRequest, context: StepContext | None) -> Posted:
        """A risky step's card with Approve / Skip (``bot.cogs.approvals``), pinging nobody."""
        channel = await self._channel(self.config.approvals_channel, rehearsal=request.rehearsal)
        message = await self._send(request, channel, **approval_message(request, context))
        return Posted(str(channel.id), str(message.id), getattr(channel, "name", None))

    async def start_thread(self, request: ThreadRequest) -> StartedThread:
        """A public thread on the announcement. Discord refuses a second thread on one message
        with 160004, and a thread started from a message has the message's id: so a retry
        after a crash answers the thread the first attempt made, and there is never a second."""
        channel = await self._channel(request.channel_id, rehearsal=False)
        message = channel.get_partial_message(int(request.message_id))
        ids = {"run_id": request.run_id, "step_id": request.step_id, "channel_id": channel.id}
        try:
            thread = await message.create_thread(
                name=request.name, auto_archive_duration=request.auto_archive_minutes
            )
        except discord.HTTPException as exc:
            if exc.code == THREAD_ALREADY_CREATED:
                log.info(
                    "run %s step %s: message %s has its thread already; taking it",
                    request.run_id,
                    request.step_id,
                    request.message_id,
                    extra=ids,
                )
                return StartedThread(str(channel.id), request.message_id, created=False)
            error = self._thread_error(channel, exc)
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            error = DeliveryError(
                f"no answer from Discord starting a thread in {channel_label(channel, '')}: {exc!r}",
                transient=True,
            )
        else:
            return StartedThread(str(channel.id), str(thread.id), created=True)
        log.warning(
            "run %s step %s: %s failure: %s",
            request.run_id,
            request.step_id,
            "transient" if error.transient else ActionOutcome.TERMINAL,
            error,
            extra=ids,
        )
        raise error

    async def post_signup(self, request: SignupPost) -> SignupPosted:
        """The run's sign-up message, by the sign-up loop's own post (the booking's: one row
        per run, claimed before the post, the run's nonce), so the loop edits it as it edits
        one posted at booking. A rehearsal run's goes to the sandbox, as its announcements do."""
        if self.signup_poster is None:
            raise DeliveryError("this bot process posts no sign-up messages", transient=False)
        rehearsal = bool(request.context and request.context.rehearsal)
        channel = await self._channel(request.channel, rehearsal=rehearsal)
        content = request.content
        if rehearsal:
            content = clip(f"{REHEARSAL_MARK} {content or ''}".strip(), limits.CONTENT_MAX)
        try:
            return await self.signup_poster.post_for_step(channel, request.run_id, request.step_id, content)
        except (discord.HTTPException, TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            raise self._failed(request.run_id, request.step_id, channel, exc, True) from None

    def _thread_error(self, channel: Any, exc: discord.HTTPException) -> DeliveryError:
        if isinstance(exc, discord.Forbidden):
            missing = self._missing_thread_permissions(channel)
            what = f"missing {', '.join(missing)}" if missing else (exc.text or "forbidden")
            return DeliveryError(
                f"the bot may not start a thread in {channel_label(channel, '')}: {what} (Discord {exc.code})",
                transient=False,
            )
        if isinstance(exc, discord.NotFound):
            return DeliveryError(
                f"the announcement in {channel_label(channel, '')} is gone (Discord {exc.code}: {exc.text})",
                transient=False,
            )
        return DeliveryError(
            f"Discord answered {exc.status} (code {exc.code}) starting a thread in {channel_label(channel, '')}: {exc.text}",
            transient=transient_status(exc.status),
        )

    def _missing_thread_permissions(self, channel: Any) -> list[str]:
        guild = getattr(channel, "guild", None)
        me = guild.me if guild is not None else None
        if me is None:
            return []
        perms = channel.permissions_for(me)
        return [permission_name(f) for f in (*SEND, *THREAD) if not getattr(perms, f)]

    async def check_thread_channel(self, ref: str) -> list[str]:
        """What starting a thread on an announcement in ``ref`` and adding attendees to it would
        hit: Create Public Threads and Send Messages in Threads there."""
        try:
            channel = await self._channel(ref, rehearsal=False)
        except DeliveryError as exc:
            return [str(exc)]
        guild = getattr(channel, "guild", None)
        if guild is None or guild.me is None:
            return [
                f"cannot check the bot's permissions in {channel_label(channel, ref)}: not connected to its server"
            ]
        perms = channel.permissions_for(guild.me)
        missing = [permission_name(f) for f in THREAD if not getattr(perms, f)]
        if missing:
            return [
                f"the bot is missing {', '.join(missing)} in {channel_label(channel, ref)}: the event's thread needs them"
            ]
        return []

    def check_attendee_role(self, alias: str) -> list[str]:
        """What granting ``alias`` to attendees would hit (``attendee_role_problems``)."""
        guild = self.bot.get_guild(self.config.guild_id) if self.config.guild_id is not None else None
        return attendee_role_problems(guild, self.config, alias)

    async def check(self, request: Announcement | Cue) -> list[str]:
        """What a real delivery would hit, sending nothing: the channel resolves and is in this
        server; the bot may view it, send and embed there; a ping would actually notify."""
        if isinstance(request, Cue):
            ref = self._cue_channel_ref(request)
            if ref is None:
                return ["no GM channel: the step names none and gm_channel is not configured"]
            return await self.check_channel(ref, ping_role=request.ping_role, announcement=False)
        text = " ".join(
            t
            for t in (
                request.content,
                request.embed.title if request.embed else None,
                request.embed.description if request.embed else None,
            )
            if t
        )
        return await self.check_channel(
            request.channel,
            ping_role=request.ping_role,
            announcement=True,
            everyone=any(word in text for word in EVERYONE),
        )

    async def check_channel(
        self,
        ref: str,
        *,
        ping_role: str | None = None,
        announcement: bool = False,
        everyone: bool = False,
    ) -> list[str]:
        try:
            channel = await self._channel(ref, rehearsal=False)
        except DeliveryError as exc:
            return [str(exc)]
        guild = getattr(channel, "guild", None)
        me = guild.me if guild is not None else None
        if guild is None or me is None:
            return [
                f"cannot check the bot's permissions in {channel_label(channel, ref)}: not connected to its server"
            ]
        perms = channel.permissions_for(me)
        problems = []
        missing = missing_permissions(perms, embed=True)
        if missing:
            problems.append(f"the bot is missing {', '.join(missing)} in {channel_label(channel, ref)}")
        if ping_role:
            problems.extend(self._ping_problems(ping_role, guild, perms, channel, ref, announcement))
        if everyone and self.config.announce.allow_everyone and not perms.mention_everyone:
            problems.append(
                f"the text says @everyone/@here but the bot is missing "
                f"{permission_name('mention_everyone')} in {channel_label(channel, ref)}: nobody would be pinged"
            )
        return problems

    # ── Helpers ───────────────────────────────────────────────────────────

    @property
    def ping_policy(self) -> PingPolicy:
        return PingPolicy(
            self.config.roles, self.config.announce.allowed_ping_roles, self.config.announce.allow_everyone
        )

    def _decide(self, request: Announcement | Cue, rehearsal: bool) -> Mentions:
        """The mention policy's decision. A ping role the config does not have fails the step,
        terminal: posting without the ping would drop it silently from a run that then reads as
        healthy."""
        decision = mentions.for_request(self.ping_policy, request, suppressed=rehearsal)
        if decision.problem:
            raise DeliveryError(decision.problem, transient=False)
        return decision

    def _cue_channel_ref(self, cue: Cue) -> str | None:
        return cue.channel or self.config.gm_channel

    def _ping_problems(
        self,
        alias: str,
        guild: discord.Guild,
        perms: discord.Permissions,
        channel: Any,
        ref: str,
        announcement: bool,
    ) -> list[str]:
        # Aliases only: a raw id would ping a role the config never named.
        decision = mentions.decide(self.ping_policy, ping_role=alias, content=None, announcement=announcement)
        if decision.problem:
            return [decision.problem]
        role_id = decision.role_id
        assert role_id is not None, "the config names every alias it knows"
        if f"@{alias}" in decision.inert:
            return [
                f"announcements may not ping role {alias!r}: add it to announce.allowed_ping_roles, "
                "or the mention stays inert"
            ]
        role = guild.get_role(role_id)
        if role is None:
            return [f"ping role {alias!r} ({role_id}) does not exist in this server"]
        if not role.mentionable and not perms.mention_everyone:
            return [
                f"role @{role.name} is not mentionable and the bot is missing "
                f"{permission_name('mention_everyone')} in {channel_label(channel, ref)}: the ping would not notify"
            ]
        return []

    async def _channel(self, ref: str | None, *, rehearsal: bool) -> Any:
        """The channel a message goes to, or a terminal ``DeliveryError`` naming what is wrong."""
        if rehearsal:
            if not self.config.sandbox_channel:
                raise DeliveryError(
                    "a rehearsal posts only to the sandbox channel, and sandbox_channel is not configured",
                    transient=False,
                )
            ref = self.config.sandbox_channel
        if ref is None:
            raise DeliveryError(
                "no GM channel: the step names none and gm_channel is not configured", transient=False
            )
        channel_id = self.config.channel_id(ref)
        if channel_id is None:
            raise DeliveryError(
                f"channel {ref!r} is not one of the channel aliases in config (channels)", transient=False
            )
        channel: Any = self.bot.get_channel(channel_id)
        if channel is None:
            try:
                channel = await self.bot.fetch_channel(channel_id)
            except discord.NotFound:
                raise DeliveryError(
                    f"channel {ref!r} ({channel_id}) does not exist", transient=False
                ) from None
            except discord.Forbidden:
                raise DeliveryError(
                    f"the bot cannot see channel {ref!r} ({channel_id}): missing {permission_name('view_channel')}",
                    transient=False,
                ) from None
            except discord.HTTPException as exc:
                raise DeliveryError(
                    f"Discord did not answer for channel {ref!r}: {exc.status} {exc.text}",
                    transient=transient_status(exc.status),
                ) from None
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise DeliveryError(
                    f"Discord did not answer for channel {ref!r}: {exc!r}", transient=True
                ) from None
        if not isinstance(channel, discord.abc.Messageable):
            raise DeliveryError(
                f"{channel_label(channel, ref)} is not a channel messages can be posted in", transient=False
            )
        guild = getattr(channel, "guild", None)
        if self.config.guild_id is not None and (guild is None or guild.id != self.config.guild_id):
            raise DeliveryError(f"{channel_label(channel, ref)} is not in this bot's server", transient=False)
        return channel

    async def _send(
        self,
        request: Announcement | Cue | ApprovalRequest,
        channel: Any,
        *,
        embed: discord.Embed | None,
        **fields: Any,
    ) -> discord.Message:
        try:
            await self.budget.take(channel.id)
            sent: discord.Message = await channel.send(
                embed=embed, nonce=nonce_for(request.idempotency_key), **fields
            )
            return sent
        except (discord.HTTPException, TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            raise self._failed(request.run_id, request.step_id, channel, exc, embed is not None) from None

    def _failed(
        self, run_id: int, step_id: int, channel: Any, exc: BaseException, embed: bool
    ) -> DeliveryError:
        """A post's failure, classified (transient or terminal) and logged here once, with the
        ids to follow the run; the runner records it on the step."""
        if isinstance(exc, discord.Forbidden):
            error = DeliveryError(forbidden_text(channel, exc, embed), transient=False)
        elif isinstance(exc, discord.NotFound):
            error = DeliveryError(
                f"{channel_label(channel, '')} no longer exists (Discord {exc.code}: {exc.text})",
                transient=False,
            )
        elif isinstance(exc, discord.HTTPException):
            error = DeliveryError(
                f"Discord answered {exc.status} (code {exc.code}) posting in {channel_label(channel, '')}: {exc.text}",
                transient=transient_status(exc.status),
            )
        else:
            error = DeliveryError(
                f"no answer from Discord posting in {channel_label(channel, '')}: {exc!r}", transient=True
            )
        log.warning(
            "run %s step %s: %s failure: %s",
            run_id,
            step_id,
            "transient" if error.transient else ActionOutcome.TERMINAL,
            error,
            extra={"run_id": run_id, "step_id": step_id, "channel_id": channel.id},
        )
        return error
