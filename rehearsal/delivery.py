"""The console delivery: each message shown as its readers would see it, nothing sent."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from actions.delivery import (
    Announcement,
    AttendeeDms,
    Cue,
    DeliveryError,
    DmsQueued,
    Embed,
    Posted,
    SignupPost,
    SignupPosted,
    StartedThread,
    ThreadRequest,
)
from actions.mentions import Mentions
from actions.messaging import attendee_mentions, discord_timestamp
from rehearsal.console import Console, run_label
from runner import views
from runner.approvals import ApprovalRequest
from runner.definitions import REMINDERS_PHASE
from runner.history import RunEnding
from runner.schedule import shown
from runner.signup_answers import SignupList
from runner.views import StepContext
from wiring.aliases import ConfigAliases
from wiring.config import Config
from wiring.control_text import closed_cue_text


class ConsoleDelivery:
    """``actions.delivery.Delivery`` that shows each message as its readers would see it.

    Announcements are shown as players see them (channel, text with the role mention in front,
    embed, who is pinged); cues as the GM sees them. Who is pinged is decided by the mention
    policy the Discord delivery applies (``actions.mentions``), for a live run: a rehearsal run
    in Discord goes to the sandbox channel with every ping suppressed, but here each message is
    shown where, and with the pings, the live event would post it. When the config names
    channels or roles it is a real server's, and a channel or ping role it lacks fails the step
    for good, as it would live; with neither configured (the quick start), any alias is
    accepted.
    """

    def __init__(self, console: Console, config: Config) -> None:
        self.console = console
        self.config = config
        self.aliases = ConfigAliases(config)
        self.sent: list[Announcement | Cue] = []
        self._posted: dict[str, Posted] = {}
        # Threads by the message they were started on: one per message, as in Discord.
        self.threads: dict[str, StartedThread] = {}
        # Sign-up messages by run: one per run, as the bot keeps it.
        self.signup_messages: dict[int, Posted] = {}
        # The rehearsal's simulated members (``--signups``), by id: shown by name.
        self.member_names: dict[str, str] = {}

    # ── the protocol ──

    async def announce(self, announcement: Announcement) -> Posted:
        return self._deliver(announcement)

    async def post_cue(self, cue: Cue) -> Posted:
        return self._deliver(cue)

    async def close_cue(self, run_id: int, step_id: int, posted: Posted, ended: RunEnding) -> None:
        reason = closed_cue_text(ended)
        self.console.emit_for_step(
            step_id,
            "delivery",
            f"{run_label(run_id, '')}: cue {posted.message_id} closed, its buttons disabled: {reason}",
            kind="cue_closed",
            run_id=run_id,
            step_id=step_id,
            reason=reason,
        )

    async def post_approval(self, request: ApprovalRequest, context: StepContext | None) -> Posted:
        """A step whose action's risk waits for staff: the card, and the wait, as staff see it."""
        existing = self._posted.get(request.idempotency_key)
        if existing is not None:
            return existing
        channel = self.config.approvals_channel
        posted = Posted(str(channel or "staff"), f"console-approval-{request.step_id}", channel)
        self._posted[request.idempotency_key] = posted
        params = ", ".join(f"{key}={value!r}" for key, value in request.params.items())
        self.console.emit_for_step(
            request.step_id,
            "delivery",
            f"{run_label(request.run_id, request.scope)}: approval needed in {f'#{channel}' if channel else 'the staff log'}: "
            f"{views.step_name(request.step_id, request.label)} runs {request.action_id} "
            f"({request.risk})",
            f"│ {params[:300] if params else '(no params)'}",
            "[ Approve ]  [ Skip ]",
            kind="approval",
            run_id=request.run_id,
            step_id=request.step_id,
            action=request.action_id,
            risk=request.risk,
            channel=channel,
        )
        return posted

    async def would_send(self, run_id: int, step_id: int, scope: str, what: str) -> None:
        """A step that reaches the game (a webhook, an RCON command) in a rehearsal: what it would
        have sent."""
        self.console.emit_for_step(
            step_id,
            "delivery",
            f"{run_label(run_id, scope)}: {what} (a rehearsal: nothing is sent)",
            kind="would_send",
            run_id=run_id,
            step_id=step_id,
        )

    async def start_thread(self, request: ThreadRequest) -> StartedThread:
        label = run_label(request.run_id, request.context.scope if request.context else "")
        existing = self.threads.get(request.message_id)
        if existing is not None:
            self.console.emit_for_step(
                request.step_id,
                "delivery",
                f"{label}: thread {existing.thread_id} is already open on message {request.message_id}",
                kind="duplicate",
                run_id=request.run_id,
                step_id=request.step_id,
            )
            return StartedThread(existing.channel_id, existing.thread_id, created=False)
        started = StartedThread(request.channel_id, request.message_id, created=True)
        self.threads[request.message_id] = started
        self.console.emit_for_step(
            request.step_id,
            "delivery",
            f"{label}: thread {request.name!r} started on message {request.message_id}",
            kind="thread",
            run_id=request.run_id,
            step_id=request.step_id,
            name=request.name,
        )
        return started

    async def post_signup(self, request: SignupPost) -> SignupPosted:
        label = run_label(request.run_id, request.context.scope if request.context else "")
        existing = self.signup_messages.get(request.run_id)
        if existing is not None:
            self.console.emit_for_step(
                request.step_id,
                "delivery",
                f"{label}: the sign-up message is up already (message {existing.message_id}); not posted again",
                kind="duplicate",
                run_id=request.run_id,
                step_id=request.step_id,
            )
            return SignupPosted(existing, created=False)
        as_announcement = Announcement(
            request.channel,
            request.content,
            Embed(title="Sign-ups"),
            None,
            "",
            request.run_id,
            request.step_id,
        )
        problems = self.aliases.problems(as_announcement)
        if problems:
            raise DeliveryError("; ".join(problems), transient=False)
        channel = self.aliases.channel(as_announcement)
        channel_id = self.config.channel_id(channel) if channel else None
        posted = Posted(
            channel_id=str(channel_id or channel),
            message_id=f"console-signup-{request.run_id}",
            channel_name=channel,
        )
        self.signup_messages[request.run_id] = posted
        listed = request.listing
        title = request.context.event_title if request.context else "event"
        closed = listed.is_closed(self.console.clock.now())
        body = self.signup_lines(listed, title, request.content)
        self.console.emit_for_step(
            request.step_id,
            "delivery",
            f"{label}: sign-up message in {self._where(channel)}, no ping",
            *body,
            kind="signup",
            run_id=request.run_id,
            step_id=request.step_id,
            scope=request.context.scope if request.context else None,
            channel=channel,
            content=request.content,
            options=[option.name for option in listed.options],
            closed=closed,
        )
        return SignupPosted(posted, created=True)

    async def dm_attendees(self, request: AttendeeDms) -> DmsQueued:
        """A reminder ``to: attendees``: the DM each seated member would get. A rehearsal has
        no sign-ups, so nobody gets it here; live, each seated member gets it once."""
        context = request.context
        label = context.step_label or "Reminder" if context is not None else "Reminder"
        scope = context.scope if context is not None else ""
        name = f"{label} ({scope})" if scope else label
        who = f"{len(request.members)} seated now" if request.members else "nobody is seated in a rehearsal"
        body = self._readable([f"✉ {line}" for line in request.content.splitlines() or [""]])
        self.console.emit_for_step(
            request.step_id,
            "delivery",
            f"{name}: DM to each member seated in the run ({who}), unless they turned reminders off",
            *body,
            kind="dm_attendees",
            run_id=request.run_id,
            step_id=request.step_id,
            scope=scope or None,
            content=request.content,
            members=len(request.members),
        )
        return DmsQueued(len(request.members))

    async def check(self, request: Announcement | Cue) -> list[str]:
        # The rule ``validate`` and ``publish`` apply too (``wiring.aliases``).
        return self.aliases.problems(request)

    # ── showing ──

    def _deliver(self, request: Announcement | Cue) -> Posted:
        problems = self.aliases.problems(request)
        if problems:
            raise DeliveryError("; ".join(problems), transient=False)
        label = self._run_label(request)
        existing = self._posted.get(request.idempotency_key)
        if existing is not None:
            # A retried step carries the same key; Discord refuses the second copy, and so do we.
            self.console.emit_for_step(
                request.step_id,
                "delivery",
                f"{label}: not posted again (same idempotency key as message {existing.message_id})",
                kind="duplicate",
                run_id=request.run_id,
                step_id=request.step_id,
            )
            return existing
        channel = self.aliases.channel(request)
        channel_id = self.config.channel_id(channel) if channel else None
        posted = Posted(
            channel_id=str(channel_id or channel or "gm"),
            message_id=f"console-{len(self.sent) + 1}",
            channel_name=channel,
        )
        self.sent.append(request)
        self._posted[request.idempotency_key] = posted
        if isinstance(request, Announcement):
            self._show_announcement(request, label, channel)
        else:
            self._show_cue(request, label, channel)
        return posted

    def _run_label(self, request: Announcement | Cue) -> str:
        scope = request.context.scope if request.context else ""
        if request.context is not None and request.context.phase_key == REMINDERS_PHASE:
            # Sent before the run starts (``Rehearsal.remind``): named as the reminder it is.
            label = request.context.step_label or "Reminder"
            return f"{label} ({scope})" if scope else label
        return run_label(request.run_id, scope)

    @staticmethod
    def _where(channel: str | None) -> str:
        return f"#{channel}" if channel else "the GM channel"

    @staticmethod
    def _ping_text(decision: Mentions) -> str:
        text = f"pings {', '.join(decision.pinged)}" if decision.pinged else "no ping"
        if decision.inert:
            text += f"; {', '.join(decision.inert)} shown but inert (pings nobody)"
        return text

    def signup_lines(self, listed: SignupList, title: str, content: str | None = None) -> list[str]:
        """The sign-up message as players see it, and its buttons (``post_signup``, and the
        rehearsal's simulated clicks after each change)."""
        body = [*(content or "").splitlines()]
        body.append(f"┃ Sign-ups: {title}")
        # As the bot draws it (``bot.cogs.signups._view``): once closed, only Leave is a live button.
        closed = listed.is_closed(self.console.clock.now())
        if closed:
            when = "Sign-ups are closed."
        elif listed.closes_at is None:
            when = "Sign-ups stay open until the event ends."
        else:
            when = f"Sign-ups close {discord_timestamp(listed.closes_at, 'R')}."
        body.append(f"┃ Starts {discord_timestamp(listed.starts_at, 'F')}. {when}")
        for option in listed.options:
            cap = f"/{option.capacity}" if option.capacity is not None else ""
            seated = self._named(attendee_mentions([s.member_id for s in option.confirmed]))
            body.append(f"┃ {option.name} ({len(option.confirmed)}{cap}): {seated}")
            if option.waitlisted:
                waiting = self._named(attendee_mentions([s.member_id for s in option.waitlisted]))
                body.append(f"┃   waiting ({len(option.waitlisted)}): {waiting}")
        capacity = f"/{listed.definition.capacity}" if listed.definition.capacity is not None else ""
        body.append(f"┃ — {len(listed.confirmed)}{capacity} signed up · {len(listed.waitlisted)} waiting")
        body = self._readable(body)
        options = "  ".join(f"[ {option.name} ]" for option in listed.options)
        body.append(f"{options}  [ Leave ]" + ("  (sign-ups are closed: only Leave works)" if closed else ""))
        return body

    def _named(self, mentions: str) -> str:
        """A simulated member's mention as their name (``@member01``), as a client shows it."""
        for member_id, name in self.member_names.items():
            mentions = mentions.replace(f"<@{member_id}>", f"@{name}")
        return mentions

    def _readable(self, lines: list[str]) -> list[str]:
        now = self.console.clock.now()
        return [readable_timestamps(line, now) for line in lines]

    def _show_announcement(self, a: Announcement, label: str, channel: str | None) -> None:
        decision = self.aliases.mentions(a)
        body: list[str] = []
        text = decision.text(markup=False)
        if a.content is not None or text is not None:
            body.extend((text or "").splitlines() or [""])
        if a.embed is not None:
            body.extend(_embed_lines(a.embed))
        body = self._readable(body)
        self.console.emit_for_step(
            a.step_id,
            "delivery",
            f"{label}: announcement in {self._where(channel)}, {self._ping_text(decision)}",
            *body,
            kind="announce",
            run_id=a.run_id,
            step_id=a.step_id,
            scope=a.context.scope if a.context else None,
            channel=channel,
            content=a.content,
            embed=_embed_record(a.embed),
            pings=list(decision.pinged),
            inert_mentions=list(decision.inert),
        )

    def _show_cue(self, c: Cue, label: str, channel: str | None) -> None:
        decision = self.aliases.mentions(c)
        body = [f"│ {c.title}", *(f"│ {line}" for line in c.instructions.splitlines())]
        if c.context is not None:
            where = [
                c.context.event_title,
                c.context.phase_label,
                # The number the card's footer, /event skip and the transcript's lines use.
                views.step_name(c.step_id),
                c.context.scope,
                "rehearsal" if c.context.rehearsal else "",
            ]
            body.append("│ " + " · ".join(part for part in where if part))
        body = self._readable(body)
        body.append("[ Confirm ]  [ Skip ]" + ("  [ Take attendance ]" if c.attendance else ""))
        self.console.emit_for_step(
            c.step_id,
            "delivery",
            f"{label}: GM cue in {self._where(channel)}, {self._ping_text(decision)}",
            *body,
            kind="cue",
            run_id=c.run_id,
            step_id=c.step_id,
            scope=c.context.scope if c.context else None,
            channel=channel,
            title=c.title,
            instructions=c.instructions,
            pings=list(decision.pinged),
        )


def _embed_lines(embed: Embed) -> list[str]:
    lines: list[str] = []
    if embed.title:
        lines.append(f"┃ {embed.title}")
    if embed.description:
        lines.extend(f"┃ {line}" for line in embed.description.splitlines())
    for item in embed.fields:
        value_lines = item.value.splitlines() or [""]
        lines.append(f"┃ {item.name}: {value_lines[0]}")
        lines.extend(f"┃   {line}" for line in value_lines[1:])
    if embed.image_url:
        lines.append(f"┃ [image] {embed.image_url}")
    if embed.footer:
        lines.append(f"┃ — {embed.footer}")
    return lines


def _embed_record(embed: Embed | None) -> dict[str, Any] | None:
    if embed is None:
        return None
    return {
        "title": embed.title,
        "description": embed.description,
        "colour": embed.colour,
        "image": embed.image_url,
        "footer": embed.footer,
        "fields": [{"name": f.name, "value": f.value, "inline": f.inline} for f in embed.fields],
    }


# A Discord timestamp as Discord parses it: seconds since the epoch and an optional style letter.
DISCORD_TIMESTAMP = re.compile(r"<t:(-?\d{1,12})(?::([tTdDfFR]))?>")
_UNITS = (
    ("year", 365 * 86400),
    ("month", 30 * 86400),
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
    ("second", 1),
)


def readable_timestamps(text: str, now: dt.datetime) -> str:
    """Every Discord timestamp in ``text`` followed by what a reader would see: the instant in
    UTC (``<t:…:F> (Fri 5 Dec 2025 20:00 UTC)``), or for ``:R`` how far it is from ``now``, the
    rehearsal's own clock (``in 15 minutes``, ``5 minutes ago``). The markup stays, as it is
    what Discord is sent."""

    def one(match: re.Match[str]) -> str:
        try:
            moment = dt.datetime.fromtimestamp(int(match[1]), dt.UTC).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            return match[0]
        words = relative(moment, now) if match[2] == "R" else shown(moment)
        return f"{match[0]} ({words})"

    return DISCORD_TIMESTAMP.sub(one, text)


def relative(moment: dt.datetime, now: dt.datetime) -> str:
    """``in 15 minutes``, ``5 minutes ago``, ``now``: the largest whole unit, as Discord words it."""
    seconds = (moment - now).total_seconds()
    size = abs(seconds)
    if size < 1:
        return "now"
    unit, length = next((unit, length) for unit, length in _UNITS if size >= length)
    count = round(size / length)
    amount = f"{count} {unit}{'' if count == 1 else 's'}"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"
