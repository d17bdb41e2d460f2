"""The requests the bot makes by id, below discord.py's public API, in one place.

discord.py's public methods for these need an object the bot does not hold: a ``discord.Thread``
(not cached after a restart, or once archived), a ``discord.Member`` (not cached without the
privileged members intent, which the bot does without), a ``discord.ScheduledEvent`` with its
user list. Getting one would cost a request of its own before the one that matters, and every
request counts against Discord's limits (``bot.invalid_requests``). So these call discord.py's
HTTP client directly, by id: still discord.py's rate limiting and error mapping
(``discord.HTTPException`` with Discord's code), one request per change. Every request here is
held to Discord's API description by the tests' simulated Discord, like every other.
"""

from __future__ import annotations

from typing import Any

import discord


async def add_to_thread(client: discord.Client, thread_id: str, member_id: str) -> None:
    """``PUT /channels/{thread}/thread-members/{user}`` (``Thread.add_user`` needs the thread)."""
    await client.http.add_user_to_thread(int(thread_id), int(member_id))


async def remove_from_thread(client: discord.Client, thread_id: str, member_id: str) -> None:
    """``DELETE /channels/{thread}/thread-members/{user}``."""
    await client.http.remove_user_from_thread(int(thread_id), int(member_id))


async def archive_thread(client: discord.Client, thread_id: str) -> None:
    """``PATCH /channels/{thread}`` with ``archived`` (``Thread.edit`` needs the thread)."""
    await client.http.edit_channel(int(thread_id), archived=True)


async def member_role_ids(client: discord.Client, guild_id: int, member_id: str) -> list[str]:
    """``GET /guilds/{g}/members/{u}``: the member's roles as Discord has them now (404 with
    10007 when the member left)."""
    member = await client.http.get_member(guild_id, int(member_id))
    return [str(role) for role in member.get("roles", ())]


async def add_role(client: discord.Client, guild_id: int, member_id: str, role_id: str, reason: str) -> None:
    """``PUT /guilds/{g}/members/{u}/roles/{r}`` (``Member.add_roles`` needs the member)."""
    await client.http.add_role(guild_id, int(member_id), int(role_id), reason=reason)


async def remove_role(
    client: discord.Client, guild_id: int, member_id: str, role_id: str, reason: str
) -> None:
    """``DELETE /guilds/{g}/members/{u}/roles/{r}``."""
    await client.http.remove_role(guild_id, int(member_id), int(role_id), reason=reason)


async def interested_page(
    client: discord.Client, guild_id: int, event_id: int, *, limit: int, with_member: bool, after: int | None
) -> list[Any]:
    """``GET /guilds/{g}/scheduled-events/{e}/users``: one page of the event's Interested users,
    raw (``ScheduledEvent.users`` needs the event object and hides the member's roles)."""
    return list(
        await client.http.get_scheduled_event_users(
            guild_id, event_id, limit=limit, with_member=with_member, after=after
        )
    )
