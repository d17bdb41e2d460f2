"""The command tree: the claim and the server-side permission check every slash command and
autocomplete passes through, and the tree half of the error boundary.

Each command declares the capability it needs in its ``extras`` (``{"capability": "control"}``);
``interaction_check`` first claims the interaction (``bot.claims``: when another process shares
the token, only the one that claimed it goes on, the other saying nothing), then refuses,
ephemerally and before the command runs, interactions from another
guild or a DM, and members without one of the capability's roles. An autocomplete from such a
member gets no choices (Discord allows no message there). The refusal is
``bot.permissions.admit``, the same one every button's ``interaction_check`` gives.
"""

from __future__ import annotations

import discord
from discord import app_commands

from bot.errors import reply_to_error
from bot.permissions import admit
from bot.protocols import served


def capability_of(command: object) -> str:
    extras = getattr(command, "extras", None) or {}
    return str(extras.get("capability", "staff"))


# The tree of an EventBot (its ``tree_cls``): ``served`` finds what the check needs on its client.
class GuardedTree(app_commands.CommandTree[discord.Client]):
    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        bot = served(interaction)
        if not await bot.interaction_gate.claimed(interaction):
            return False
        return await admit(bot.config, interaction, capability_of(interaction.command))

    async def on_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError, /
    ) -> None:
        await reply_to_error(interaction, error)
