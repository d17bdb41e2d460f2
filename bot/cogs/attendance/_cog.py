"""``/event attendance`` and ``/event history``, and the attendance page's select menu and page
buttons (a cue's "Take attendance" is one), rebuilt from their custom ids so they work after a
restart and in whichever process claims the press.

Taking attendance needs the ``attendance`` right: the ``cue`` capability (the GM at the cue) or
``signups`` (staff afterwards); a record needs any staff role. Every answer is ephemeral.
"""

from __future__ import annotations

import re
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.cogs.attendance._render import page_embed, page_view, record_embed
from bot.components import claimed_and_admitted
from bot.custom_ids import AttendancePage, AttendancePick
from bot.errors import BotError, reply_to_error
from bot.protocols import served
from bridge import signup_messages
from runner import attendance
from runner.history import Actor
from runner.states import Attendance

TAKE = {"capability": "attendance"}
READ = {"capability": "staff"}


def no_list(run_id: int) -> BotError:
    return BotError(f"Run {run_id} has no sign-up list (no such run, or its event has no signup:).")


async def _panel(
    interaction: discord.Interaction, run_id: int, page: int
) -> tuple[discord.Embed, discord.ui.View]:
    engine = served(interaction).services.engine
    shown = await attendance.page_of(engine, run_id, page)
    if shown is None:
        raise no_list(run_id)
    title = await signup_messages.event_title(engine, run_id) or "event"
    return page_embed(shown, title), page_view(shown)


async def take_attendance(
    interaction: discord.Interaction,
    run: int,
    member: discord.Member | None = None,
    status: Attendance | None = None,
) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    if member is not None or status is not None:
        if member is None or status is None:
            raise BotError("Give both member and status to mark one member, or neither to see the list.")
        if await attendance.page_of(bot.services.engine, run, 0) is None:
            raise no_list(run)
        marker = Actor(str(interaction.user.id), interaction.user.display_name)
        who = Actor(str(member.id), member.display_name)
        await attendance.mark_one(bot.services.engine, run, who, status, marker, bot.services.clock.now())
        await interaction.followup.send(
            f"Marked <@{member.id}> in run {run}: {status.value.replace('_', ' ')}.", ephemeral=True
        )
        return
    embed, view = await _panel(interaction, run, 0)
    await interaction.followup.send(embed=embed, view=view, ephemeral=True)


async def member_history(interaction: discord.Interaction, member: discord.Member) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    record = await attendance.record_of(served(interaction).services.engine, str(member.id))
    await interaction.followup.send(embed=record_embed(record, member.display_name), ephemeral=True)


async def _show(interaction: discord.Interaction, run_id: int, page: int) -> None:
    embed, view = await _panel(interaction, run_id, page)
    message = interaction.message
    if message is not None and message.flags.ephemeral:
        await interaction.response.edit_message(embed=embed, view=view)
    else:  # the cue's button: the page opens for whoever pressed it
        await interaction.response.send_message(embed=embed, view=view, ephemeral=True)


class AttendancePickMenu(
    discord.ui.DynamicItem[discord.ui.Select[discord.ui.View]], template=AttendancePick.TEMPLATE
):
    def __init__(self, run_id: int, page: int) -> None:
        super().__init__(discord.ui.Select(custom_id=AttendancePick(run_id, page).custom_id))
        self.run_id, self.page = run_id, page

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> AttendancePickMenu:
        pick = AttendancePick.from_match(match)
        return cls(pick.run_id, pick.page)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, "attendance")

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            bot = served(interaction)
            picked = set(self.item.values)
            marker = Actor(str(interaction.user.id), interaction.user.display_name)
            now = bot.services.clock.now()
            if (
                await attendance.mark_page(bot.services.engine, self.run_id, self.page, picked, marker, now)
                is None
            ):
                raise no_list(self.run_id)
            await _show(interaction, self.run_id, self.page)
        except Exception as exc:
            await reply_to_error(interaction, exc)


class AttendancePageButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=AttendancePage.TEMPLATE
):
    def __init__(self, run_id: int, page: int) -> None:
        super().__init__(
            discord.ui.Button(label="Attendance", custom_id=AttendancePage(run_id, page).custom_id)
        )
        self.run_id, self.page = run_id, page

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> AttendancePageButton:
        press = AttendancePage.from_match(match)
        return cls(press.run_id, press.page)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, "attendance")

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await _show(interaction, self.run_id, self.page)
        except Exception as exc:
            await reply_to_error(interaction, exc)


def add_commands(group: app_commands.Group) -> app_commands.Group:
    """``attendance`` and ``history`` added to ``/event`` (``group``): the running bot's and sync's."""
    for name, description, callback, described, extras in (
        (
            "attendance",
            "Mark who came to a run (pick from its seated members), or one member's mark",
            take_attendance,
            {"run": "The run", "member": "One member to mark", "status": "Their mark"},
            TAKE,
        ),
        (
            "history",
            "A member's attendance record: came, no-shows, late cancels",
            member_history,
            {"member": "The member"},
            READ,
        ),
    ):
        command: app_commands.Command[Any, ..., None] = app_commands.Command(
            name=name,
            description=description,
            callback=app_commands.describe(**described)(callback),
            parent=group,
            extras=extras,
        )
        group.add_command(command)
    return group


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook`` after ``bot.cogs.control._cog``, whose ``/event`` group
    these commands join."""
    bot.add_dynamic_items(AttendancePickMenu, AttendancePageButton)
    group = bot.tree.get_command("event")
    if isinstance(group, app_commands.Group):
        add_commands(group)
