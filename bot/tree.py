"""The command tree: the server-side permission check every slash command and autocomplete
passes through, and the tree half of the error boundary.

Each command declares the capability it needs in its ``extras`` (``{"capability": "control"}``);
``interaction_check`` refuses, ephemerally and before the command runs, interactions from another
guild or a DM, and members without one of the capability's roles. An autocomplete from such a
member gets no choices (Discord allows no message there). The refusal is
``bot.permissions.admit``, the same one every button's ``interaction_check`` gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands

from bot.errors import reply_to_error
from bot.permissions import admit

if TYPE_CHECKING:
    from bot.app import EventBot  # noqa: F401 (the base class names it as a string)


def capability_of(command: object) -> str:
    extras = getattr(command, "extras", None) or {}
    return str(extras.get("capability", "staff"))


# The tree of an EventBot (its ``tree_cls``), so ``self.client`` is one.
class GuardedTree(app_commands.CommandTree["EventBot"]):
    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await admit(self.client.config, interaction, capability_of(interaction.command))

    async def on_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError, /
    ) -> None:
        await reply_to_error(interaction, error)
