"""Sign-up buttons in Discord: one per option and Leave, on the message
``bot.cogs.signups._messages`` posts. A press is dispatched by its custom id
(``bot.custom_ids.SignupPress``) to ``SignupButton``, which this extension's ``setup`` registers,
so a press works after a restart and in whichever bot process Discord hands it to (the one that
claimed it, ``bot.claims``): the sign-up lives in the database only.

A press is acknowledged at once (deferred, ephemeral), then answered ephemerally with what the
database decided (a seat, a place on the waiting list, sign-ups are closed, the roles needed);
the message's list is then brought up to date by the loop, coalesced.
"""

from __future__ import annotations

import re
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.cogs.signups._staff import StaffSignupButton
from bot.cogs.signups._staff import add_commands as add_staff_commands
from bot.cogs.signups._view import LEAVE, custom_id, join_answer, leave_answer
from bot.custom_ids import SignupPress
from bot.errors import reply_to_error, send_ephemeral
from bot.permissions import wrong_guild
from bot.protocols import Served, served
from bridge import signup_messages

NOT_THIS_MESSAGE = "This button does not belong to this run's sign-up message; nothing was done."


class SignupButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=SignupPress.TEMPLATE):
    """An option's button (or Leave) on a sign-up message, rebuilt from its custom id."""

    def __init__(self, run_id: int, choice: str) -> None:
        super().__init__(discord.ui.Button(label=choice, custom_id=custom_id(run_id, choice)))
        self.run_id = run_id
        self.choice = choice

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> SignupButton:
        press = SignupPress.from_match(match)
        return cls(press.run_id, press.choice)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        # Only the process that claimed the press acts on it (the other says nothing).
        bot = served(interaction)
        if not await bot.interaction_gate.claimed(interaction):
            return False
        if wrong_guild(bot.config, interaction.guild_id):
            await send_ephemeral(interaction, "This bot only serves its own server; nothing was done.")
            return False
        return True

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await click(served(interaction), interaction, self.run_id, self.choice)
        except Exception as exc:
            await reply_to_error(interaction, exc)


async def click(bot: Served, interaction: discord.Interaction, run_id: int, choice: str) -> None:
    # Acknowledged first, so the answer is in time whatever the database takes.
    await interaction.response.defer(ephemeral=True, thinking=True)
    # The custom id is the client's to write: the run it names must be the one this message was
    # posted for, or a forged press would sign a member up to any run.
    posted = await signup_messages.message_of(bot.services.engine, run_id)
    message = interaction.message
    if posted is None or message is None or posted.message_id != str(message.id):
        await interaction.followup.send(NOT_THIS_MESSAGE, ephemeral=True)
        return
    member = interaction.user
    if choice == LEAVE:
        text = await leave(bot, member, run_id)
    else:
        held = bot.config.aliases_held(r.id for r in getattr(member, "roles", ()))
        now = bot.services.clock.now()
        # The desk publishes the change once committed: the message, roles and thread follow.
        answer = await bot.services.signups.join(
            run_id, str(member.id), member.display_name, choice, held, now
        )
        text = join_answer(answer, _role_mentions(bot))
    await interaction.followup.send(text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none())


async def leave(bot: Served, member: discord.User | discord.Member, run_id: int) -> str:
    """``member`` gives their place on ``run_id``'s list up, whether they pressed Leave on the
    sign-up message or under ``/events mine``: one rule path. The desk frees the seat and
    promotes the first member waiting for it in the same transaction, once, then publishes the
    change, so the message, roles and thread follow. The answer, in words."""
    now = bot.services.clock.now()
    answer = await bot.services.signups.leave(run_id, str(member.id), member.display_name, now)
    return leave_answer(answer, _role_mentions(bot))


def _role_mentions(bot: Served) -> dict[str, str]:
    return {alias: f"<@&{role_id}>" for alias, role_id in bot.config.roles.items()}


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook``: a press on any sign-up message reaches ``SignupButton``."""
    bot.add_dynamic_items(SignupButton, StaffSignupButton)
    # Loaded after ``bot.cogs.control._cog``, whose ``/event`` group ``/event signups`` joins.
    group = bot.tree.get_command("event")
    if isinstance(group, app_commands.Group):
        add_staff_commands(group)
