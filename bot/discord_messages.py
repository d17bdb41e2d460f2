"""Building what the Discord delivery sends: the permissions a post needs and their names, the
nonce a step's idempotency key becomes, the mentions Discord may ping, an embed from its spec,
and which of Discord's answers are worth trying again.
"""

from __future__ import annotations

from typing import Any

import discord

from actions import limits
from actions.delivery import Embed
from actions.mentions import Mentions

SEND = ("view_channel", "send_messages")


# What starting a thread on an announcement and adding the attendees to it need.
THREAD = ("create_public_threads", "send_messages_in_threads")


# Discord's answer to a second thread on one message: the thread exists, which is success.
THREAD_ALREADY_CREATED = 160004


EMBED = ("embed_links",)


EVERYONE = ("@everyone", "@here")


def nonce_for(idempotency_key: str) -> str:
    """The message nonce for a step: the first 25 of its 40 random hex characters."""
    return idempotency_key[: limits.NONCE_MAX]


def permission_name(flag: str) -> str:
    return {
        "mention_everyone": "Mention @everyone, @here and All Roles",
        "view_channel": "View Channel",
        "send_messages_in_threads": "Send Messages in Threads",
    }.get(flag, flag.replace("_", " ").title())


def channel_label(channel: Any, ref: str) -> str:
    name = getattr(channel, "name", None)
    return f"#{name} ({channel.id})" if name else f"{ref!r}"


def allowed_mentions(decision: Mentions) -> discord.AllowedMentions:
    """The policy's decision as Discord applies it: only what it names may ping, users only
    those a cue pings by name (its attendees)."""
    if decision.suppressed:
        return discord.AllowedMentions.none()
    users: list[discord.Object] | bool = [discord.Object(i) for i in decision.allowed_user_ids] or False
    return discord.AllowedMentions(
        everyone=decision.everyone,
        users=users,
        roles=[discord.Object(i) for i in decision.allowed_role_ids],
        replied_user=False,
    )


def missing_permissions(perms: discord.Permissions, *, embed: bool) -> list[str]:
    """What the bot lacks to post here, most basic first. Discord denies Embed Links implicitly
    with Send Messages, so only the permission that needs granting is named."""
    for flag in SEND:
        if not getattr(perms, flag):
            return [permission_name(flag)]
    return [permission_name(f) for f in EMBED if embed and not getattr(perms, f)]


def transient_status(status: int) -> bool:
    """Rate limits and server errors pass; any other refusal will not."""
    return status == 429 or status >= 500


def build_embed(spec: Embed) -> discord.Embed:
    embed = discord.Embed(
        title=spec.title,
        description=spec.description,
        colour=discord.Colour(spec.colour) if spec.colour is not None else None,
    )
    if spec.image_url:
        embed.set_image(url=spec.image_url)
    if spec.footer:
        embed.set_footer(text=spec.footer)
    for field in spec.fields:
        embed.add_field(name=field.name, value=field.value, inline=field.inline)
    return embed


def forbidden_text(channel: Any, exc: discord.Forbidden, embed: bool) -> str:
    """Why Discord refused a post in ``channel``: the permissions the bot lacks there, if known."""
    guild = getattr(channel, "guild", None)
    me = guild.me if guild is not None else None
    missing: list[str] = []
    if me is not None:
        missing = missing_permissions(channel.permissions_for(me), embed=embed)
    what = f"missing {', '.join(missing)}" if missing else (exc.text or "forbidden")
    return f"the bot may not post in {channel_label(channel, '')}: {what} (Discord {exc.code})"
