"""Events written and changed from Discord: ``/event create`` from a template, ``/event edit`` of
the common fields, ``/event export`` of the YAML (``_cog``; the form is ``_form``). What they
produce is checked, previewed and published by ``bot.cogs.publishing``. This package is the
extension ``EventBot.setup_hook`` loads, after ``bot.cogs.control._cog``."""

from __future__ import annotations

from discord import app_commands
from discord.ext import commands

from bot.cogs.authoring._cog import add_commands, on_form
from bot.protocols import served_by

__all__ = ["add_commands", "setup"]


async def setup(bot: commands.Bot) -> None:
    """Adds ``create``, ``edit`` and ``export`` to the ``/event`` group the control cog made, and
    the listener that reads their forms' submits."""
    served_by(bot)
    group = bot.tree.get_command("event")
    assert isinstance(group, app_commands.Group), "bot.cogs.control._cog is loaded first"
    add_commands(group)
    bot.add_listener(on_form, "on_interaction")
