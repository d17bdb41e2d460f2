"""The check every button passes before its callback: ``claimed_and_admitted``.

discord.py rebuilds a button from its custom id (``DynamicItem``) and calls its
``interaction_check`` before its callback; each of the bot's buttons answers with this. First
the claim (``bot.claims``: only the process that claimed a press acts on it, the other says
nothing), then the permission (``bot.permissions.admit``: a member without the capability is
refused ephemerally, and nothing changes), as the command tree does for commands.
"""

from __future__ import annotations

import discord

from bot.permissions import admit
from bot.protocols import served


async def claimed_and_admitted(interaction: discord.Interaction, capability: str) -> bool:
    bot = served(interaction)
    if not await bot.interaction_gate.claimed(interaction):
        return False
    return await admit(bot.config, interaction, capability)
