"""The bot's one error boundary, and the errors it raises on purpose.

``tree.on_error`` (slash commands) and every component callback (``DynamicItem`` errors never
reach a ``View.on_error`` in discord.py; they are only logged) end up in ``reply_to_error``:
errors written for people (``runner.errors.UserFacingError`` and the ones below) become a short
ephemeral reply; a database that cannot be reached gets its own short reply; anything else is a
bug, logged once with its traceback and the interaction's ids, and the member gets an apology.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import discord
from discord import app_commands

from actions import limits
from bot.rendering import clip
from runner.db import DATABASE_ERRORS
from runner.errors import UserFacingError

log = logging.getLogger(__name__)

__all__ = ["DATABASE_ERRORS", "BotError", "StartupError", "reply_to_error", "send_ephemeral"]
APOLOGY = "Something went wrong on our side; it has been logged. Check /event status before trying again."
DATABASE_DOWN = "The event database cannot be reached right now. Try again in a moment."


class BotError(UserFacingError):
    """That cannot be done."""


class StartupError(Exception):
    """The bot cannot start (or sync): one line for the person who ran the command.

    Never contains the token."""


def user_message(error: BaseException) -> str | None:
    """The reply for an error meant for people, or ``None`` for a bug."""
    original = _unwrap(error)
    if isinstance(original, UserFacingError):
        return original.message
    if isinstance(original, DATABASE_ERRORS):
        return DATABASE_DOWN
    if isinstance(original, app_commands.CheckFailure):
        return str(original) or "You may not use that command here."
    return None


def _custom_id(interaction: discord.Interaction) -> object:
    data: Mapping[str, object] = interaction.data or {}
    return data.get("custom_id")


def _unwrap(error: BaseException) -> BaseException:
    while isinstance(error, app_commands.CommandInvokeError):
        error = error.original
    return error


async def reply_to_error(interaction: discord.Interaction, error: BaseException) -> None:
    """Answer the member, ephemerally, and log what needs a developer's eyes.

    It never raises: it is the last code between an error and the member, and an error escaping
    it would reach discord.py's own handlers, which tell the member nothing."""
    try:
        original = _unwrap(error)
        message = user_message(original)
        if message is None:
            command = interaction.command.qualified_name if interaction.command else None
            log.error(
                "unexpected error handling interaction %s (%s)",
                interaction.id,
                command or _custom_id(interaction),
                exc_info=original,
                extra={
                    "interaction_id": interaction.id,
                    "guild_id": interaction.guild_id,
                    "user_id": interaction.user.id if interaction.user else None,
                    "command": command,
                },
            )
            message = APOLOGY
        elif isinstance(original, DATABASE_ERRORS):
            log.warning("database unreachable while handling interaction %s: %s", interaction.id, original)
    except Exception:
        log.exception("the error boundary failed on interaction %s", getattr(interaction, "id", None))
        message = APOLOGY
    await send_ephemeral(interaction, message)


async def send_ephemeral(interaction: discord.Interaction, message: str) -> None:
    """Reply ephemerally whether or not the interaction was answered (or deferred) already.

    The text is fitted to Discord's 2,000 characters (an error may quote what the member typed,
    up to 6,000 characters), and nothing raises: an interaction that expired, or was answered
    in the meantime, is logged, since nobody is left to tell."""
    text = clip(str(message), limits.CONTENT_MAX) if str(message).strip() else APOLOGY
    try:
        if not interaction.response.is_done():
            try:
                await interaction.response.send_message(text, ephemeral=True)
                return
            except discord.InteractionResponded:
                pass  # answered between the check and the send: a followup still reaches them
        await interaction.followup.send(text, ephemeral=True)
    except Exception as exc:
        log.warning("could not answer interaction %s: %s", getattr(interaction, "id", None), exc)
