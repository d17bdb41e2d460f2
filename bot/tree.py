"""The command tree: the server-side permission check every slash command and autocomplete
passes through, and the tree half of the error boundary.

Each command declares the capability it needs in its ``extras`` (``{"capability": "control"}``);
``interaction_check`` refuses, ephemerally and before the command runs, interactions from another
guild or a DM, and members without one of the capability's roles. An autocomplete from such a
member gets no choices (Discord allows no message there).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import discord
from discord import app_commands

from bot.errors import reply_to_error, send_ephemeral
from bot.permissions import refusal

if TYPE_CHECKING:
    from bot.app import EventBot

log = logging.getLogger(__name__)


def capability_of(command: object) -> str:
    extras = getattr(command, "extras", None) or {}
    return str(extras.get("capability", "staff"))


class GuardedTree(app_commands.CommandTree):
    client: EventBot

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        command = interaction.command
        reason = refusal(self.client.config, interaction, capability_of(command))
        if reason is None:
            return True
        log.info(
            "refused %s to user %s in guild %s",
            command.qualified_name if command else "an interaction",
            interaction.user.id,
            interaction.guild_id,
            extra={"user_id": interaction.user.id, "guild_id": interaction.guild_id},
        )
        if interaction.type is discord.InteractionType.autocomplete:
            try:
                await interaction.response.autocomplete([])
            except discord.HTTPException as exc:
                log.debug("could not answer autocomplete %s: %s", interaction.id, exc)
        else:
            # The reason lists the roles that may: fitted like every other reply.
            await send_ephemeral(interaction, reason)
        return False

    async def on_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError, /
    ) -> None:
        await reply_to_error(interaction, error)
