"""``/reminders off`` and ``/reminders on``: each member's own choice to get event reminders by
direct message or not, for everyone on the server (no role needed), answered ephemerally. It is
honoured by the reminders written ``to: attendees`` (a member who turned them off is left out
when one falls due, and a DM of theirs not yet sent is dropped), not by anything staff send.
"""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.permissions import EVERYONE
from bot.protocols import Served, served_by
from bridge import reminder_dms

FOR_EVERYONE = {"capability": EVERYONE}
TURNED_OFF = (
    "🔕 Reminders by DM are off: events you are signed up for will not remind you by DM. "
    "`/reminders on` turns them back on."
)
TURNED_ON = (
    "🔔 Reminders by DM are on: events you are seated in remind you by DM when their authors "
    "asked for it. `/reminders off` turns them off."
)


class ReminderCog(commands.GroupCog, group_name="reminders", group_description="Event reminders by DM"):
    def __init__(self, bot: Served) -> None:
        self.bot = bot
        super().__init__()

    @app_commands.command(name="off", description="Get no more event reminders by DM", extras=FOR_EVERYONE)
    async def off(self, interaction: discord.Interaction) -> None:
        await self._turn(interaction, on=False)

    @app_commands.command(name="on", description="Get event reminders by DM again", extras=FOR_EVERYONE)
    async def on(self, interaction: discord.Interaction) -> None:
        await self._turn(interaction, on=True)

    async def _turn(self, interaction: discord.Interaction, *, on: bool) -> None:
        # Acknowledged first, so the answer is in time whatever the database takes.
        await interaction.response.defer(ephemeral=True, thinking=True)
        services = self.bot.services
        await reminder_dms.turn_reminders(
            services.engine, str(interaction.user.id), on=on, now=services.clock.now()
        )
        await interaction.followup.send(TURNED_ON if on else TURNED_OFF, ephemeral=True)


def reminder_commands() -> app_commands.Group:
    """``/reminders`` as Discord is told it, built without a bot to serve it (``bot.app``'s sync)."""
    group = ReminderCog.__new__(ReminderCog).app_command
    assert group is not None, "a GroupCog always has its group"
    return group


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook`` as an extension (``bot.load_extension``)."""
    await bot.add_cog(ReminderCog(served_by(bot)))
