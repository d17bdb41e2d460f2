"""``/event skip-date`` and ``/event move-date``: a new version of the event with the date
skipped or moved, published as ``/event publish`` publishes (the member as the actor), so the
change is versioned and diffable like any file. Publishing cancels or moves the run already
booked for that date (``runner.catalog``); its sign-up message, its Events-tab listing and its
reminders follow the run, and the staff log says so.

A mixin rather than a cog of its own: discord.py binds a group's subcommands per cog, and these
belong under ``/event``. Named ``skip-date`` because ``/event skip`` skips a step of a run.
"""

from __future__ import annotations

import zoneinfo

import discord
from discord import app_commands
from discord.ext import commands

from actions import limits
from bot.permissions import actor_of
from bot.protocols import Served
from bot.rendering import clip, timestamp
from runner import catalog, schedule, views
from runner.bus import StaffNotice, VersionPublished
from runner.clock import to_naive_utc
from runner.definitions import CronSchedule, EventDefinition
from wiring import date_exceptions

PUBLISH = {"capability": "publish"}
MAX_CHOICES = 25
CHOICE_MAX = 100
SOURCE = "discord:/event {command}"


async def _say(interaction: discord.Interaction, text: str) -> None:
    await interaction.followup.send(clip(text, limits.CONTENT_MAX), ephemeral=True)


def _name(definition: EventDefinition) -> str:
    return f"{clip(definition.title, 100)} ({definition.key})"


class DateCommands(commands.Cog):
    """The two commands, for ``EventCog`` to carry (it provides ``bot``)."""

    bot: Served

    @app_commands.command(
        name="skip-date",
        description="Skip one date of a recurring event (publishes a new version)",
        extras=PUBLISH,
    )
    @app_commands.describe(
        event="The recurring event", date="The date to skip, e.g. 2026-12-25 (the event's zone)"
    )
    async def skip_date(self, interaction: discord.Interaction, event: str, date: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        current = await self._current(event)
        now = self.bot.services.clock.now()
        changed, day = date_exceptions.skipped(current.definition, date, now)
        version = await self._publish(interaction, changed, "skip-date")
        self._tell_staff(interaction, f"skipped {_name(changed)} on {day:%a} {day} (version {version})")
        await _say(
            interaction,
            f"⏭️ {_name(changed)} is skipped on {day:%a} {day} (version {version}). A run already "
            "booked for it is cancelled; its sign-up message and Events-tab listing follow.",
        )

    @app_commands.command(
        name="move-date",
        description="Move one date of a recurring event to another time (publishes a new version)",
        extras=PUBLISH,
    )
    @app_commands.describe(
        event="The recurring event",
        date="The date whose occurrence moves, e.g. 2026-12-25 (the event's zone)",
        to="Its new start, e.g. 2026-12-26 18:00 (the event's zone)",
    )
    async def move_date(self, interaction: discord.Interaction, event: str, date: str, to: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        current = await self._current(event)
        now = self.bot.services.clock.now()
        changed, day, local = date_exceptions.moved(current.definition, date, to, now)
        version = await self._publish(interaction, changed, "move-date")
        start = to_naive_utc(local.replace(tzinfo=zoneinfo.ZoneInfo(schedule.zone_of(changed))))
        self._tell_staff(
            interaction,
            f"moved {_name(changed)}'s {day:%a} {day} occurrence to {timestamp(start, 'F')} (version {version})",
        )
        await _say(
            interaction,
            f"📅 {_name(changed)}: the {day:%a} {day} occurrence now starts {timestamp(start, 'F')} "
            f"(version {version}). A run already booked for it moves, with its sign-ups, reminders, "
            "sign-up message and Events-tab listing.",
        )

    def _tell_staff(self, interaction: discord.Interaction, what: str) -> None:
        # Only the process that handled the command gets here, so the line is posted once; it
        # is said even when no run is booked yet for the date (no run line would say it).
        who = actor_of(interaction.user)
        self.bot.services.runner.bus.publish(StaffNotice(clip(f"📅 <@{who.id}> {what}.", limits.CONTENT_MAX)))

    async def _current(self, key: str) -> catalog.CurrentDefinition:
        services = self.bot.services
        return await views.current_definition(services.engine, key, services.versions)

    async def _publish(
        self, interaction: discord.Interaction, definition: EventDefinition, command: str
    ) -> int:
        services = self.bot.services
        published = await catalog.publish(
            services.engine,
            definition,
            services.clock.now(),
            source=SOURCE.format(command=command),
            actor=actor_of(interaction.user),
        )
        # The schedule (occurrences, reminders, the Events tab) follows the new version at once.
        services.runner.bus.publish(VersionPublished(definition.key))
        return published.version

    @skip_date.autocomplete("event")
    @move_date.autocomplete("event")
    async def _recurring(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        services = self.bot.services
        found = await views.published_definitions(services.engine, services.versions)
        needle = current.strip().lower()
        choices = []
        for d in found:
            if len(d.key) > CHOICE_MAX or not isinstance(d.schedule, CronSchedule):
                continue
            if needle and needle not in d.key.lower() and needle not in d.title.lower():
                continue
            choices.append(app_commands.Choice(name=clip(_name(d), CHOICE_MAX), value=d.key))
        return choices[:MAX_CHOICES]
