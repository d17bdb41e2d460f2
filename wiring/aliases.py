"""A step's channel and ping role held to the config's aliases: what a real server would refuse.

One rule for both places that ask it: the rehearsal's console delivery refuses what it finds when
a step runs (``rehearsal.delivery.ConsoleDelivery``), and ``validate`` / ``publish`` report it
before anything is published (``wiring.definition_checks.check_aliases``, through
``AliasCheckDelivery``), so what passes the check is what a rehearsal posts. When the config
names channels or roles it is a real server's, and a channel or ping role it lacks is refused;
with neither configured (the quick start), any alias is accepted. Nothing here imports discord.
"""

from __future__ import annotations

import re

from actions import mentions
from actions.delivery import (
    Announcement,
    AttendeeDms,
    Cue,
    DeliveryError,
    DmsQueued,
    Posted,
    SignupPost,
    SignupPosted,
    StartedThread,
    ThreadRequest,
)
from actions.mentions import Mentions, PingPolicy
from runner.approvals import ApprovalRequest
from runner.history import RunEnding
from runner.suggestions import did_you_mean
from runner.views import StepContext
from wiring.config import Config


class ConfigAliases:
    """The config's channel and role aliases, and the ping policy the Discord delivery applies
    to them, for a live run."""

    def __init__(self, config: Config) -> None:
        self.config = config

    @property
    def strict(self) -> bool:
        """Whether a channel must be one of the config's: it names channels, so a real server's."""
        return bool(self.config.channels)

    def channel(self, request: Announcement | Cue) -> str | None:
        """The channel alias ``request`` goes to (a cue without one goes to ``gm_channel``)."""
        channel = (
            request.channel
            if isinstance(request, Announcement)
            else (request.channel or self.config.gm_channel)
        )
        return channel.lstrip("#") if channel else None

    @property
    def ping_policy(self) -> PingPolicy:
        # A config naming channels or roles is a real server's; with neither (the quick start)
        # there is no server to hold an alias to.
        configured = self.config.roles or self.config.channels
        return PingPolicy(
            self.config.roles if configured else None,
            self.config.announce.allowed_ping_roles,
            self.config.announce.allow_everyone,
        )

    def mentions(self, request: Announcement | Cue) -> Mentions:
        """Who ``request`` pings, decided as for a live run: a rehearsal's suppression of every
        ping is Discord's sandbox, not the event's."""
        return mentions.for_request(self.ping_policy, request)

    def problems(self, request: Announcement | Cue) -> list[str]:
        """What would make the bot refuse to post ``request``: a channel or a ping role the
        config does not have."""
        problems = self._channel_problems(request)
        if self.mentions(request).unknown_role is not None:
            known = ", ".join(sorted(self.config.roles)) or "none"
            hint = did_you_mean(request.ping_role or "", self.config.roles)
            problems.append(
                f"ping role {request.ping_role!r} is not one of the role aliases in config (roles: {known}){hint}"
            )
        return problems

    def _channel_problems(self, request: Announcement | Cue) -> list[str]:
        if not self.strict:
            return []
        channel = self.channel(request)
        if channel is None:
            return ["no GM channel: the step names none and gm_channel is not configured"]
        if self.config.channel_id(channel) is None:
            known = ", ".join(sorted(self.config.channels))
            hint = did_you_mean(channel, self.config.channels)
            return [
                f"channel {channel!r} is not one of the channel aliases in config (channels: {known}){hint}"
            ]
        return []


# Where each of ``ConfigAliases.problems``' words is about, in a step's params: what a
# validate problem names as its field (the action answers them as one "; "-joined error).
_FIELD_OF = {
    "ping role ": "params.ping_role",
    "channel ": "params.channel",
    "no GM channel": "params.channel",
}
_ONE_PROBLEM = re.compile("; (?=" + "|".join(re.escape(start) for start in _FIELD_OF) + ")")


def located(error: str) -> list[tuple[str | None, str]]:
    """An alias check's error as (field, problem) pairs, one per problem it joins."""
    found = []
    for problem in _ONE_PROBLEM.split(error):
        field = next((f for start, f in _FIELD_OF.items() if problem.startswith(start)), None)
        found.append((field, problem))
    return found


class AliasCheckDelivery:
    """``actions.delivery.Delivery`` for a preflight against the config and nothing else: its
    ``check`` is ``ConfigAliases.problems``, and a preflight asks only that (a verify sends
    nothing). Asked to send, it refuses for good, since a check is not a place to post."""

    def __init__(self, config: Config) -> None:
        self.aliases = ConfigAliases(config)

    async def check(self, request: Announcement | Cue) -> list[str]:
        return self.aliases.problems(request)

    async def announce(self, announcement: Announcement) -> Posted:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)

    async def post_cue(self, cue: Cue) -> Posted:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)

    async def close_cue(self, run_id: int, step_id: int, posted: Posted, ended: RunEnding) -> None:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)

    async def start_thread(self, request: ThreadRequest) -> StartedThread:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)

    async def post_signup(self, request: SignupPost) -> SignupPosted:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)

    async def dm_attendees(self, request: AttendeeDms) -> DmsQueued:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)

    async def post_approval(self, request: ApprovalRequest, context: StepContext | None) -> Posted:
        raise DeliveryError(NOT_A_POSTING_DELIVERY, transient=False)


NOT_A_POSTING_DELIVERY = "the alias check only checks; it posts and closes nothing"
