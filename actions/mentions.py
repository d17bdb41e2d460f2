"""Who a message pings: the one mention policy every delivery applies.

The Discord delivery turns the decision into ``discord.AllowedMentions``; the offline rehearsal
prints it. Both ask this module, so a rehearsal shows the pings the live bot would make for as
long as the code runs, not only while two copies of the rules happen to agree.

The rules:

* A step names its ping role by alias (``roles`` in config). The role's mention goes in front of
  the text. An alias the config lacks is a ``problem``: the delivery fails the step for good
  rather than post without the ping and let the run read as healthy.
* An announcement pings only roles in ``announce.allowed_ping_roles``; any other role it
  mentions (its own ping role included) is shown but inert. A GM cue pings its own role.
* ``@everyone`` / ``@here`` ping only with ``announce.allow_everyone``; users never, but for
  the attendees a cue with ``ping: attendees`` names (``ping_members``): at most
  ``ALLOWED_USERS_MAX`` of them (Discord's limit on ``allowed_mentions.users``), and as many as
  fit the content's 2000 characters; the rest are counted ("and 12 more"), not pinged.
* A suppressed message (a rehearsal run posting in Discord's sandbox) shows every mention and
  pings nobody.
* With no server configured at all (``roles=None``: the offline quick start) any alias stands
  for itself and pings, since there is nothing to hold it to.

Nothing is dropped silently: each mention is either pinged, shown inert, or a problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from actions import limits
from actions.delivery import Announcement, Cue

EVERYONE = re.compile(r"@(everyone|here)\b")
# Discord's markup for a role and for a user (``<@!id>`` is the older nickname form).
RAW_ROLE = re.compile(r"<@&([0-9]+)>")
RAW_USER = re.compile(r"<@!?([0-9]+)>")


@dataclass(frozen=True)
class PingPolicy:
    """The config's part of the rule."""

    # Alias -> role id; None when no server is configured (offline only).
    roles: Mapping[str, int] | None
    allowed_ping_roles: Sequence[str] = ()
    allow_everyone: bool = False

    @property
    def allowed_role_ids(self) -> tuple[int, ...]:
        if self.roles is None:
            return ()
        return tuple(self.roles[a] for a in self.allowed_ping_roles if a in self.roles)


@dataclass(frozen=True)
class Mentions:
    """The decision for one message."""

    # The ping role put in front of the text, and its id (None offline with no server).
    role_alias: str | None
    role_id: int | None
    # The author's text, as given.
    content: str | None
    # As readers see them ("@players", "@everyone"): notified, and shown but notifying nobody.
    pinged: tuple[str, ...]
    inert: tuple[str, ...]
    # What Discord is told may ping: ``allowed_mentions.roles`` and its ``everyone``.
    allowed_role_ids: tuple[int, ...]
    everyone: bool
    # Shown, pinging nobody: Discord is told to let nothing ping.
    suppressed: bool = False
    # The ping role's alias when the config does not have it: the step cannot be posted.
    unknown_role: str | None = None
    # The members mentioned after the role (a cue's ``ping: attendees``), and how many more
    # there were than fit; ``allowed_user_ids`` those of them Discord is told may ping.
    member_ids: tuple[str, ...] = ()
    more_members: int = 0
    allowed_user_ids: tuple[int, ...] = ()

    @property
    def problem(self) -> str | None:
        if self.unknown_role is None:
            return None
        return f"ping role {self.unknown_role!r} is not one of the role aliases in config (roles)"

    def text(self, *, markup: bool) -> str | None:
        """The text to post with the role mention in front: Discord's ``<@&id>`` with
        ``markup``, else ``@alias`` as readers see it."""
        prefix = None
        if self.role_alias is not None and self.unknown_role is None:
            prefix = f"<@&{self.role_id}>" if markup and self.role_id is not None else f"@{self.role_alias}"
        members = member_text(self.member_ids, self.more_members)
        return " ".join(part for part in (prefix, members, self.content) if part) or None


def member_text(member_ids: Sequence[str], more: int) -> str | None:
    """``<@1> <@2> and 3 more``: the mentions of the members a message pings."""
    if not member_ids and not more:
        return None
    mentions = " ".join(f"<@{member_id}>" for member_id in member_ids)
    return f"{mentions} and {more} more" if more else mentions


def members_that_fit(member_ids: Sequence[str], room: int) -> tuple[tuple[str, ...], int]:
    """As many of ``member_ids`` (in order) as Discord lets one message ping and as fit in
    ``room`` characters with the "and N more" that counts the rest; and how many are left."""
    shown: list[str] = []
    for index, member_id in enumerate(member_ids):
        rest = len(member_ids) - index - 1
        candidate = [*shown, member_id]
        if len(candidate) > limits.ALLOWED_USERS_MAX or len(member_text(candidate, rest) or "") > room:
            break
        shown = candidate
    return tuple(shown), len(member_ids) - len(shown)


def decide(
    policy: PingPolicy,
    *,
    ping_role: str | None,
    content: str | None,
    announcement: bool,
    suppressed: bool = False,
    ping_members: Sequence[str] = (),
) -> Mentions:
    """Who is pinged, what is inert, and whether the ping role exists, for one message;
    ``ping_members``: the members a cue pings by name (its attendees)."""
    roles = policy.roles
    role_id = roles.get(ping_role) if roles is not None and ping_role is not None else None
    unknown = ping_role if ping_role is not None and roles is not None and role_id is None else None
    if announcement:
        allowed_ids = policy.allowed_role_ids
    else:
        allowed_ids = (role_id,) if role_id is not None else ()
    everyone = announcement and policy.allow_everyone
    if suppressed:
        allowed_ids, everyone = (), False

    pinged: list[str] = []
    inert: list[str] = []

    def note(label: str, pings: bool) -> None:
        target = pinged if pings else inert
        if label not in pinged and label not in inert:
            target.append(label)

    if ping_role is not None and unknown is None:
        # Offline with no server nothing is configured to hold the alias to: it pings as written.
        pings = role_id in allowed_ids if roles is not None else not suppressed
        note(f"@{ping_role}", pings)
    text = content or ""
    by_id = {v: k for k, v in roles.items()} if roles else {}
    for match in RAW_ROLE.finditer(text):
        found = int(match.group(1))
        note(f"@{by_id[found]}" if found in by_id else match.group(0), found in allowed_ids)
    for match in RAW_USER.finditer(text):
        note(match.group(0), False)
    for match in EVERYONE.finditer(text):
        note(match.group(0), everyone)
    # The role mention in front, then the members, then the text: the members get what is left.
    reserve = limits.ROLE_MENTION_RESERVE if ping_role else 0
    room = limits.CONTENT_MAX - reserve - (len(content) + 1 if content else 0)
    members, more = members_that_fit(ping_members, room)
    for member_id in members:
        note(f"<@{member_id}>", not suppressed)
    return Mentions(
        role_alias=ping_role,
        role_id=role_id,
        content=content,
        pinged=tuple(pinged),
        inert=tuple(inert),
        allowed_role_ids=allowed_ids,
        everyone=everyone,
        suppressed=suppressed,
        unknown_role=unknown,
        member_ids=members,
        more_members=more,
        allowed_user_ids=() if suppressed else tuple(int(m) for m in members),
    )


def for_request(policy: PingPolicy, request: Announcement | Cue, *, suppressed: bool = False) -> Mentions:
    """The decision for an announcement (its text and ping role) or a cue (its ping role and
    the attendees it pings: the instructions go in an embed, and embeds ping nobody)."""
    if isinstance(request, Announcement):
        return decide(
            policy,
            ping_role=request.ping_role,
            content=request.content,
            announcement=True,
            suppressed=suppressed,
        )
    return decide(
        policy,
        ping_role=request.ping_role,
        content=None,
        announcement=False,
        suppressed=suppressed,
        ping_members=request.ping_members,
    )
