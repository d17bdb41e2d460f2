"""A word to one member about a run, by direct message; when their DMs are closed (Discord's
50007), a mention of them alone in the channel of the run's sign-up message instead. Promotion
notices and reminders to attendees both go this way."""

from __future__ import annotations

import discord

from bot.background import Background
from bot.cogs.signups._view import NO_MENTIONS
from bridge import signup_messages

CANNOT_DM = 50007


async def dm_or_mention(
    kit: Background, run_id: int, member_id: int, text: str, *, nonce: str
) -> tuple[str | None, str | None]:
    """How it reached them (``dm`` / ``mention``) or why it did not: (via, error). ``nonce``: the
    same for every attempt, so Discord answers a repeat with the message sent first."""
    try:
        user = kit.client.get_user(member_id) or await kit.client.fetch_user(member_id)
        await user.send(text, allowed_mentions=NO_MENTIONS, nonce=nonce)
        return "dm", None
    except discord.Forbidden as exc:
        if exc.code != CANNOT_DM:
            return None, f"Discord refused the DM: {exc.status} {exc.text}"[:500]
    except discord.HTTPException as exc:
        return None, f"Discord refused the DM: {exc.status} {exc.text}"[:500]
    # Their DMs are closed: a mention where the sign-up is, which pings them alone.
    message = await signup_messages.message_of(kit.engine, run_id)
    channel = kit.client.get_channel(int(message.channel_id)) if message is not None else None
    if not isinstance(channel, discord.abc.Messageable):
        return None, "their DMs are closed and the sign-up message's channel cannot be found"
    try:
        await kit.budget.take(channel.id)
        await channel.send(
            f"<@{member_id}> {text}",
            allowed_mentions=discord.AllowedMentions(
                users=[discord.Object(member_id)], roles=False, everyone=False
            ),
            nonce=nonce,
        )
    except discord.HTTPException as exc:
        return None, f"Discord refused the mention: {exc.status} {exc.text}"[:500]
    return "mention", None
