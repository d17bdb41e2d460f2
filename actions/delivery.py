"""The small interface the announce and cue actions talk to.

The bot supplies the Discord implementation, the offline rehearsal a console one, and tests the
``RecordingDelivery`` below. Implementers must:

* deliver at most one message per ``idempotency_key`` where the platform allows it (Discord: the
  key becomes the message ``nonce`` with ``enforce_nonce``), because a step is retried with the
  same key after a timeout or a crash;
* raise ``DeliveryError(transient=True)`` when they cannot tell whether the message went out or
  the failure may pass (rate limits, 5xx, timeouts), and ``transient=False`` when retrying cannot
  help (missing access, unknown channel), with a message naming the channel and what is missing;
* answer ``check`` without sending anything: the problems a real delivery would hit;
* ``start_thread`` at most one thread per announcement: a repeat answers the thread the message
  has (Discord's 160004 "already created" is success), so a step retried after a crash never
  makes two;
* ``close_cue`` a cue they posted whose run ended before it could wait for a GM (a cancel
  pressed while it was being posted): no live buttons on a dead run, and the text says why;
* ``post_signup`` at most one sign-up message per run, whoever posts it (the booking or a
  ``discord.signup`` step, retried after a crash or not): a run that has its message answers
  that message, never a second;
* ``dm_attendees`` at most one direct message per member per reminder of a run, however often
  it is asked (a reminder retried after a crash), and none to a member who turned them off.
* ``post_approval`` at most one approval request per ``request.idempotency_key`` (a step whose
  action's risk waits for staff, ``runner.approvals``), with Approve and Skip, in the approval
  channel.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.approvals import ApprovalRequest, RequestApproval
from runner.history import RunEnding
from runner.signups import SignupList
from runner.states import AnswerKey
from runner.views import StepContext

# The step describer (``runner.views.step_describer``): a step's context for its message text.
Describe = Callable[[int, int], Awaitable[StepContext | None]]


@dataclass(frozen=True)
class EmbedField:
    name: str
    value: str
    inline: bool = False


@dataclass(frozen=True)
class Embed:
    title: str | None = None
    description: str | None = None
    colour: int | None = None
    image_url: str | None = None
    footer: str | None = None
    fields: tuple[EmbedField, ...] = ()


@dataclass(frozen=True)
class Announcement:
    channel: str
    content: str | None
    embed: Embed | None
    ping_role: str | None
    idempotency_key: str
    run_id: int
    step_id: int
    context: StepContext | None = None


@dataclass(frozen=True)
class Cue:
    channel: str | None
    title: str
    instructions: str
    ping_role: str | None
    idempotency_key: str
    run_id: int
    step_id: int
    context: StepContext | None = None
    # ``ping: attendees``: the member ids the cue mentions and pings (the run's confirmed
    # attendees, in click order); the mention policy decides how many fit.
    ping_members: tuple[str, ...] = ()
    # ``attendance: true``: the cue also offers the GM the run's seated members to mark.
    attendance: bool = False


@dataclass(frozen=True)
class SignupPost:
    """A run's sign-up message, posted by a ``discord.signup`` step: its buttons and list are
    the run's (``listing``), ``content`` the step's own words above them (pinging nobody)."""

    channel: str
    content: str | None
    listing: SignupList
    run_id: int
    step_id: int
    context: StepContext | None = None


@dataclass(frozen=True)
class AttendeeDms:
    """A reminder written ``to: attendees``: ``content`` (placeholders filled in) for each of
    ``members``, the run's seated members when it fell due."""

    content: str
    members: tuple[str, ...]
    run_id: int
    step_id: int
    context: StepContext | None = None


@dataclass(frozen=True)
class DmsQueued:
    """What became of an ``AttendeeDms``: how many members it goes to (each once), and how many
    seated members turned reminders off."""

    members: int
    opted_out: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"members": self.members, "opted_out": self.opted_out}


@dataclass(frozen=True)
class Posted:
    """Where a message went; stored on the step so it can be edited later."""

    channel_id: str
    message_id: str
    channel_name: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id,
            "message_id": self.message_id,
            "channel_name": self.channel_name,
        }


@dataclass(frozen=True)
class SignupPosted:
    posted: Posted
    # False when the run had its message already (posted at booking, or by an earlier attempt).
    created: bool

    def as_dict(self) -> dict[str, Any]:
        return {"posted": self.posted.as_dict(), "created": self.created}


@dataclass(frozen=True)
class ThreadRequest:
    name: str
    channel_id: str
    message_id: str
    auto_archive_minutes: int
    run_id: int
    step_id: int
    context: StepContext | None = None


@dataclass(frozen=True)
class StartedThread:
    channel_id: str
    thread_id: str
    # False when the message had its thread already (a retry after a crash).
    created: bool

    def as_dict(self) -> dict[str, Any]:
        return {"channel_id": self.channel_id, "thread_id": self.thread_id, "created": self.created}


class DeliveryError(Exception):
    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class Delivery(Protocol):
    async def announce(self, announcement: Announcement) -> Posted:
        """Post an announcement; at most once per idempotency key where the platform allows."""
        ...

    async def post_cue(self, cue: Cue) -> Posted:
        """Post a cue a GM answers (confirm / skip); return where it went."""
        ...

    async def check(self, request: Announcement | Cue) -> list[str]:
        """Problems a real delivery of ``request`` would hit, without sending anything."""
        ...

    async def close_cue(self, run_id: int, step_id: int, posted: Posted, ended: RunEnding) -> None:
        """Close a posted cue that will never be answered: buttons off, and how its run ``ended``
        (status, who, why) worded in the front end's own way."""
        ...

    async def start_thread(self, request: ThreadRequest) -> StartedThread:
        """Start the thread on the announcement ``request`` names; the message's thread if it
        has one already (a retry), never a second."""
        ...

    async def post_signup(self, request: SignupPost) -> SignupPosted:
        """Post the run's sign-up message in ``request.channel``; the message the run has
        already (wherever it went), if it has one, never a second."""
        ...

    async def dm_attendees(self, request: AttendeeDms) -> DmsQueued:
        """Send ``request.content`` to each member by direct message, once per member and
        reminder, leaving out those who turned reminders off."""
        ...

    async def post_approval(self, request: ApprovalRequest, context: StepContext | None) -> Posted:
        """Post the request for staff to approve or skip a step before it runs; return where."""
        ...


def cue_closer(
    delivery: Delivery,
) -> Callable[[int, int, dict[str, Any] | None, RunEnding], Awaitable[None]]:
    """The runner's ``close_parked`` hook for a delivery: finds where the cue went in what the
    action answered (``{"posted": {...}}``) and has the delivery close it."""

    async def close(run_id: int, step_id: int, output: dict[str, Any] | None, ended: RunEnding) -> None:
        posted = (output or {}).get("posted")
        if not isinstance(posted, dict) or not posted.get("message_id"):
            return
        where = Posted(str(posted["channel_id"]), str(posted["message_id"]), posted.get("channel_name"))
        await delivery.close_cue(run_id, step_id, where, ended)

    return close


def approval_requester(delivery: Delivery, describe: Describe) -> RequestApproval:
    """The runner's ``request_approval`` hook for a delivery: the request posted with its step's
    context, answered in the actions' protocol (where it went, or a failure the runner retries
    when it may pass)."""

    async def request(approval: ApprovalRequest) -> dict[str, Any]:
        context = await describe(approval.run_id, approval.step_id)
        try:
            posted = await delivery.post_approval(approval, context)
        except DeliveryError as exc:
            return {AnswerKey.OK: False, AnswerKey.RETRY: exc.transient, AnswerKey.ERROR: str(exc)}
        return {AnswerKey.OK: True, AnswerKey.OUTPUT: {"posted": posted.as_dict()}}

    return request


@dataclass
class Recorded:
    kind: str
    request: Announcement | Cue
    posted: Posted
    at: dt.datetime | None = None


@dataclass
class RecordingDelivery:
    """Keeps every delivery in memory. Dedups by idempotency key as Discord does with
    ``enforce_nonce``, and counts the attempts it refused, so a test can tell "sent twice" from
    "asked twice". Failures can be scripted per call."""

    known_channels: set[str] | None = None
    sent: list[Recorded] = field(default_factory=list)
    attempts: list[Announcement | Cue] = field(default_factory=list)
    closed: list[tuple[int, Posted, RunEnding]] = field(default_factory=list)
    deduplicated: int = 0
    failures: list[DeliveryError] = field(default_factory=list)
    # Threads by the message they were started on: one per message, as Discord allows.
    threads: dict[str, StartedThread] = field(default_factory=dict)
    thread_attempts: list[ThreadRequest] = field(default_factory=list)
    # Sign-up messages by run: one per run, as the bot keeps it.
    signup_messages: dict[int, Posted] = field(default_factory=dict)
    signup_attempts: list[SignupPost] = field(default_factory=list)
    # Each member's reminder DMs by (run, step): once each, as the bot sends them.
    dms: dict[tuple[int, int, str], str] = field(default_factory=dict)
    # Approval requests, in the order they were posted (one per key, as a nonce keeps it).
    approvals: list[ApprovalRequest] = field(default_factory=list)
    _next_id: int = 1000
    _by_key: dict[str, Posted] = field(default_factory=dict)

    def fail_next(self, message: str, *, transient: bool, times: int = 1) -> None:
        self.failures.extend(DeliveryError(message, transient=transient) for _ in range(times))

    async def announce(self, announcement: Announcement) -> Posted:
        return self._deliver("announce", announcement, announcement.channel)

    async def post_cue(self, cue: Cue) -> Posted:
        return self._deliver("cue", cue, cue.channel or "gm")

    async def check(self, request: Announcement | Cue) -> list[str]:
        channel = request.channel if isinstance(request, Announcement) else (request.channel or "gm")
        if self.known_channels is not None and channel not in self.known_channels:
            return [f"channel {channel!r} does not exist"]
        return []

    async def close_cue(self, run_id: int, step_id: int, posted: Posted, ended: RunEnding) -> None:
        self.closed.append((step_id, posted, ended))

    async def start_thread(self, request: ThreadRequest) -> StartedThread:
        self.thread_attempts.append(request)
        if self.failures:
            raise self.failures.pop(0)
        if request.message_id in self.threads:
            return dataclasses.replace(self.threads[request.message_id], created=False)
        started = StartedThread(request.channel_id, request.message_id, created=True)
        self.threads[request.message_id] = started
        return started

    async def post_signup(self, request: SignupPost) -> SignupPosted:
        self.signup_attempts.append(request)
        if self.failures:
            raise self.failures.pop(0)
        if self.known_channels is not None and request.channel not in self.known_channels:
            raise DeliveryError(f"channel {request.channel!r} does not exist", transient=False)
        existing = self.signup_messages.get(request.run_id)
        if existing is not None:
            return SignupPosted(existing, created=False)
        self._next_id += 1
        posted = Posted(request.channel, str(self._next_id), request.channel)
        self.signup_messages[request.run_id] = posted
        return SignupPosted(posted, created=True)

    async def dm_attendees(self, request: AttendeeDms) -> DmsQueued:
        if self.failures:
            raise self.failures.pop(0)
        for member in request.members:
            self.dms.setdefault((request.run_id, request.step_id, member), request.content)
        return DmsQueued(len(request.members))

    async def post_approval(self, request: ApprovalRequest, context: StepContext | None) -> Posted:
        if self.failures:
            raise self.failures.pop(0)
        existing = self._by_key.get(request.idempotency_key)
        if existing is not None:
            self.deduplicated += 1
            return existing
        self._next_id += 1
        posted = Posted("approvals", str(self._next_id), "approvals")
        self._by_key[request.idempotency_key] = posted
        self.approvals.append(request)
        return posted

    def _deliver(self, kind: str, request: Announcement | Cue, channel: str) -> Posted:
        self.attempts.append(request)
        if self.failures:
            raise self.failures.pop(0)
        if self.known_channels is not None and channel not in self.known_channels:
            raise DeliveryError(f"channel {channel!r} does not exist", transient=False)
        existing = self._by_key.get(request.idempotency_key)
        if existing is not None:
            self.deduplicated += 1
            return existing
        self._next_id += 1
        posted = Posted(channel_id=channel, message_id=str(self._next_id), channel_name=channel)
        self._by_key[request.idempotency_key] = posted
        self.sent.append(Recorded(kind, request, posted))
        return posted

    def announcements(self) -> list[Announcement]:
        return [r.request for r in self.sent if isinstance(r.request, Announcement)]

    def cues(self) -> list[Cue]:
        return [r.request for r in self.sent if isinstance(r.request, Cue)]
