"""``/events``, for every member of the served guild (no role needed): ``/events upcoming``, the
next events with their Discord timestamps, open seats and the member's own state; ``/events
mine``, the member's sign-ups, each with a Leave button. Every answer is ephemeral: it is about
the member who asked.

A group cannot be invoked bare in Discord, hence the two subcommands. Past one page (25
entries, 20 under ``/events mine`` whose Leave buttons take four rows, or what fits one embed's
description) the answer gets Previous and Next. Each button's whole state is its custom id
(``bot.custom_ids.EventsPage``, ``EventsLeave``), read back by a ``DynamicItem`` this extension
registers, so a press works after a restart and in whichever process claimed it; the list is read
again at every press. Leave is the sign-up message's own Leave (``bot.cogs.signups._cog.leave``):
the desk frees the seat, promotes the first member waiting once, and the message follows.
"""

from __future__ import annotations

import re
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.cogs.players._render import PER_PAGE, PER_PAGE_MINE, Page, leave_label, page_at, page_embed
from bot.cogs.signups._cog import leave
from bot.components import claimed_and_admitted
from bot.custom_ids import EventsLeave, EventsList, EventsPage
from bot.errors import reply_to_error
from bot.permissions import EVERYONE
from bot.protocols import Served, served, served_by
from runner import views

EVERYONE_MAY = {"capability": EVERYONE}
UPCOMING: EventsList = "u"
MINE: EventsList = "m"
# Discord's five buttons per row; the fifth row is kept for Previous and Next.
PER_ROW = 5
NAV_ROW = 4


async def read_page(bot: Served, user: discord.abc.User, listing: EventsList, number: int) -> Page:
    """Page ``number`` of ``listing`` for ``user``, read now."""
    services = bot.services
    now = services.clock.now()
    if listing == MINE:
        found = await views.mine(services.engine, services.versions, now, str(user.id))
        return page_at(found, PER_PAGE_MINE, number)
    found = await views.coming(services.engine, services.versions, now, str(user.id))
    return page_at(found, PER_PAGE, number)


def page_view(page: Page, listing: EventsList) -> discord.ui.View:
    """A Leave per entry of ``/events mine``; Previous and Next when there is more than a page."""
    view = discord.ui.View(timeout=None)
    if listing == MINE:
        for index, (number, entry) in enumerate(page.entries):
            assert entry.run_id is not None, "a sign-up is always on a booked run"
            view.add_item(
                LeaveButton(entry.run_id, page.number, leave_label(number, entry), row=index // PER_ROW)
            )
    if page.count > 1:
        # Never clamped to the page shown: the two ids differ on the first page and the last.
        back = max(page.number - 1, 0)
        view.add_item(PageButton(listing, back, "Previous", disabled=page.number == 0))
        view.add_item(PageButton(listing, page.number + 1, "Next", disabled=page.number + 1 >= page.count))
    return view


async def show(interaction: discord.Interaction, listing: EventsList) -> None:
    # Acknowledged first: the lists are read from the database, which may take a while.
    await interaction.response.defer(ephemeral=True, thinking=True)
    page = await read_page(served(interaction), interaction.user, listing, 0)
    view = page_view(page, listing)
    embed = page_embed(page, mine=listing == MINE)
    if view.children:
        await interaction.followup.send(embed=embed, view=view, ephemeral=True)
    else:
        await interaction.followup.send(embed=embed, ephemeral=True)


async def redraw(
    interaction: discord.Interaction, listing: EventsList, number: int, note: str | None = None
) -> None:
    """The member's own ephemeral message, showing page ``number`` as it is now."""
    page = await read_page(served(interaction), interaction.user, listing, number)
    embed = page_embed(page, mine=listing == MINE, note=note)
    await interaction.edit_original_response(embed=embed, view=page_view(page, listing))


class PlayersCog(
    commands.GroupCog, group_name="events", group_description="What is coming, and your sign-ups"
):
    def __init__(self, bot: Served) -> None:
        self.bot = bot
        super().__init__()

    @app_commands.command(
        name="upcoming",
        description="The next events: when, the seats still open, and whether you are signed up",
        extras=EVERYONE_MAY,
    )
    async def upcoming(self, interaction: discord.Interaction) -> None:
        await show(interaction, UPCOMING)

    @app_commands.command(
        name="mine", description="The events you are signed up to, each with Leave", extras=EVERYONE_MAY
    )
    async def mine(self, interaction: discord.Interaction) -> None:
        await show(interaction, MINE)


class PageButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=EventsPage.TEMPLATE):
    """Previous or Next under an ``/events`` answer: the page it opens, read again now."""

    def __init__(
        self, listing: EventsList, page: int, label: str = "Next", *, disabled: bool = False
    ) -> None:
        super().__init__(
            discord.ui.Button(
                label=label,
                style=discord.ButtonStyle.secondary,
                custom_id=EventsPage(listing, page).custom_id,
                disabled=disabled,
                row=NAV_ROW,
            )
        )
        self.listing, self.page = listing, page

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> PageButton:
        press = EventsPage.from_match(match)
        return cls(press.listing, press.page)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, EVERYONE)

    async def callback(self, interaction: discord.Interaction) -> None:
        # A DynamicItem's errors reach no View.on_error: the boundary is invoked here.
        try:
            await interaction.response.defer()
            await redraw(interaction, self.listing, self.page)
        except Exception as exc:
            await reply_to_error(interaction, exc)


class LeaveButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=EventsLeave.TEMPLATE):
    """Leave under ``/events mine``: the presser leaves the run's list (only ever their own
    place, so a forged id can take nobody else's), then sees the page again with the answer."""

    def __init__(self, run_id: int, page: int, label: str = "Leave", *, row: int | None = None) -> None:
        super().__init__(
            discord.ui.Button(
                label=label,
                style=discord.ButtonStyle.danger,
                custom_id=EventsLeave(run_id, page).custom_id,
                row=row,
            )
        )
        self.run_id, self.page = run_id, page

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> LeaveButton:
        press = EventsLeave.from_match(match)
        return cls(press.run_id, press.page)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, EVERYONE)

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await interaction.response.defer()
            answer = await leave(served(interaction), interaction.user, self.run_id)
            await redraw(interaction, MINE, self.page, note=answer)
        except Exception as exc:
            await reply_to_error(interaction, exc)


def players_commands() -> app_commands.Group:
    """``/events`` as Discord is told it, without a bot to serve it (``python -m bot sync``):
    discord.py binds a cog's commands in ``Cog.__new__``, so ``__init__`` need not run."""
    group = PlayersCog.__new__(PlayersCog).app_command
    assert group is not None, "a GroupCog always has its group"
    return group


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook``: ``/events`` and its buttons, pressed before a restart too."""
    bot.add_dynamic_items(PageButton, LeaveButton)
    await bot.add_cog(PlayersCog(served_by(bot)))
