"""``/event``: start, rehearse, pause, resume, cancel, retry, skip, status, health, list,
upcoming, validate and publish (whose reading, replies and buttons are ``bot.cogs.publishing._flow``'s).

Thin on purpose: each callback parses, calls one function of the engine (``Controls`` or a view),
and renders the answer. Who may run what is checked by the tree before any callback runs
(``bot.tree.GuardedTree``; each command names its capability in ``extras``). Every answer is
ephemeral: the staff log channel is the public record of what staff did.

Every callback defers first (``thinking``), because the database may take longer than the three
seconds Discord gives an interaction to be answered.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from actions import limits
from bot.cogs.control import _render as rendering
from bot.cogs.control._health import bot_health, health_embed
from bot.cogs.control._preflight import check_start, confirmed_scope
from bot.cogs.cues._render import mark_settled, settled_text
from bot.cogs.dates._cog import DateCommands
from bot.cogs.events_tab._loop import listing_status_line
from bot.cogs.publishing._flow import PublishButton, publish_upload, validate_upload
from bot.cogs.signups._view import with_signup_counts
from bot.components import claimed_and_admitted
from bot.custom_ids import StartAnywayPress, StartMode
from bot.errors import BotError, reply_to_error
from bot.permissions import actor_of
from bot.protocols import Served, served, served_by
from bot.rendering import clip, control_answer, fit
from runner import schedule, signups, views
from runner.controls import Control, ControlResult, Reason
from runner.states import RunStatus, StepStatus

START = {"capability": "start"}
CONTROL = {"capability": "control"}
REHEARSE = {"capability": "rehearse"}
READ = {"capability": "staff"}
PUBLISH = {"capability": "publish"}
MAX_CHOICES = 25
# Discord's limit on an autocomplete choice's name and on its value.
CHOICE_MAX = 100


def scope_value(scope: str) -> str:
    """What autocomplete sends for ``scope``: the scope itself when it fits a choice's value,
    otherwise a short token stable across republishing (unlike an index), which ``resolve_scope``
    maps back."""
    if len(scope) <= CHOICE_MAX:
        return scope
    digest = hashlib.blake2b(scope.encode(), digest_size=6).hexdigest()
    return f"{scope[:80]}…#{digest}"


def resolve_scope(value: str | None, scopes: Sequence[str]) -> str | None:
    """The scope a typed or chosen value names: the scope itself, or the one whose token it is."""
    if value is None or value in scopes:
        return value
    return next((s for s in scopes if len(s) > CHOICE_MAX and scope_value(s) == value), value)


async def reply(interaction: discord.Interaction, text: str | None = None, **fields: object) -> None:
    text = clip(text or "", limits.CONTENT_MAX)
    await interaction.followup.send(text, ephemeral=True, **fields)  # type: ignore[call-overload]


def matches(current: str, *texts: str) -> bool:
    needle = current.strip().lower()
    return not needle or any(needle in t.lower() for t in texts)


class EventCog(DateCommands, commands.GroupCog, group_name="event", group_description="Run live events"):
    def __init__(self, bot: Served, client: discord.Client) -> None:
        # ``bot``: what the commands act through; ``client``: Discord itself (the channels
        # ``/event health`` checks, the cue messages ``/event cancel`` and ``skip`` edit).
        self.bot = bot
        self.client = client
        super().__init__()

    # ── start / rehearse ──────────────────────────────────────────────────

    @app_commands.command(name=Control.START.value, description="Start a published event now", extras=START)
    @app_commands.describe(definition="The event to start", scope="One scope (default: every scope)")
    async def start(
        self, interaction: discord.Interaction, definition: str, scope: str | None = None
    ) -> None:
        await self._start(interaction, definition, scope, rehearsal=False)

    @app_commands.command(
        name="rehearse",
        description="Play an event out in the staff sandbox channel, waits compressed",
        extras=REHEARSE,
    )
    @app_commands.describe(definition="The event to rehearse", scope="One scope (default: every scope)")
    async def rehearse(
        self, interaction: discord.Interaction, definition: str, scope: str | None = None
    ) -> None:
        await self._start(interaction, definition, scope, rehearsal=True)

    async def _start(
        self, interaction: discord.Interaction, key: str, scope: str | None, *, rehearsal: bool
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        services = self.bot.services
        current = await views.current_definition(services.engine, key, services.versions)
        scopes = current.definition.run_scopes()
        scope = resolve_scope(scope, scopes)
        if scope is not None and scope not in scopes:
            refused = ControlResult(
                False,
                Control.START,
                Reason.NO_SUCH_SCOPE,
                definition_key=key,
                scope=scope,
                scopes=tuple(scopes),
            )
            await reply(interaction, control_answer(refused))
            return
        check = await check_start(services, self.bot.config, key, scope, rehearsal=rehearsal)
        if check.problems:
            view = discord.ui.View(timeout=None)
            mode: StartMode = "r" if rehearsal else "l"
            view.add_item(StartAnyway(check.key, check.version_id, check.scope_token, mode))
            embed = rendering.problems_embed(check.title, check.problems, rehearsal=rehearsal)
            await reply(interaction, embed=embed, view=view)
            return
        result = await services.controls.start(
            key, scope=scope, actor=actor_of(interaction.user), rehearsal=rehearsal
        )
        await reply(interaction, control_answer(result))

    @start.autocomplete("definition")
    @rehearse.autocomplete("definition")
    async def _definitions(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await self._definition_choices(current)

    async def _definition_choices(self, current: str) -> list[app_commands.Choice[str]]:
        found = await views.list_definitions(self.bot.services.engine, self.bot.services.versions)
        choices = []
        for d in found:
            # A key that does not fit a choice's value could not come back as itself: not offered.
            if len(d.key) > CHOICE_MAX or not matches(current, d.key, d.title):
                continue
            mark = " · unreadable" if d.unreadable else ""
            name = clip(f"{d.title} ({d.key})", CHOICE_MAX - len(mark)) + mark
            choices.append(app_commands.Choice(name=name, value=d.key))
        return choices[:MAX_CHOICES]

    @start.autocomplete("scope")
    @rehearse.autocomplete("scope")
    async def _scopes(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        key = getattr(interaction.namespace, "definition", None)
        found = await views.list_definitions(self.bot.services.engine, self.bot.services.versions)
        scopes = next((d.scopes for d in found if d.key == key), [])
        choices = []
        for s in scopes:
            value = scope_value(s)
            # A token that is also another scope's name would start that scope instead.
            if value != s and value in scopes:
                continue
            if matches(current, s):
                choices.append(app_commands.Choice(name=clip(s, CHOICE_MAX), value=value))
        return choices[:MAX_CHOICES]

    # ── run controls ──────────────────────────────────────────────────────
    # Each control's command (start's above too) is named for it: the word its answers use
    # ("cannot pause: …").

    @app_commands.command(
        name=Control.PAUSE.value, description="Pause a run (a step being sent finishes)", extras=CONTROL
    )
    @app_commands.describe(run="The run to pause")
    async def pause(self, interaction: discord.Interaction, run: int) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        result = await self.bot.services.controls.pause(run, actor=actor_of(interaction.user))
        await self._done(interaction, result)

    @app_commands.command(name=Control.RESUME.value, description="Resume a paused run", extras=CONTROL)
    @app_commands.describe(run="The run to resume")
    async def resume(self, interaction: discord.Interaction, run: int) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        result = await self.bot.services.controls.resume(run, actor=actor_of(interaction.user))
        await self._done(interaction, result)

    @app_commands.command(
        name=Control.RETRY.value, description="Retry the failed step a run stopped at", extras=CONTROL
    )
    @app_commands.describe(run="The run to retry")
    async def retry(self, interaction: discord.Interaction, run: int) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        result = await self.bot.services.controls.retry(run, actor=actor_of(interaction.user))
        await self._done(interaction, result)

    @app_commands.command(
        name=Control.CANCEL.value, description="Cancel a run; its open cues are closed", extras=CONTROL
    )
    @app_commands.describe(
        run="The run to cancel",
        reason="Why (it goes in the run's history)",
        cleanup="Undo what the run did to the game, latest first (default: yes)",
    )
    async def cancel(
        self,
        interaction: discord.Interaction,
        run: int,
        reason: app_commands.Range[str, 1, 300],
        cleanup: bool = True,
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        result = await self.bot.services.controls.cancel(
            run, reason=reason, actor=actor_of(interaction.user), cleanup=cleanup
        )
        edited = 0
        if result.ok and result.cues:
            text = settled_text(
                StepStatus.CANCELLED,
                interaction.user.mention,
                at=self.bot.services.clock.now(),
                reason=reason,
            )
            edited = await mark_settled(self.client, result.cues, text)
        await self._done(interaction, result, edited=edited)

    @app_commands.command(
        name=Control.SKIP.value, description="Skip a pending step or a waiting cue", extras=CONTROL
    )
    @app_commands.describe(run="The run", step="The step to skip")
    async def skip(self, interaction: discord.Interaction, run: int, step: int) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        result = await self.bot.services.controls.skip(step, run_id=run, actor=actor_of(interaction.user))
        edited = 0
        if result.ok and result.cues:
            text = settled_text(
                StepStatus.SKIPPED, interaction.user.mention, at=self.bot.services.clock.now()
            )
            edited = await mark_settled(self.client, result.cues, text)
        await self._done(interaction, result, edited=edited)

    async def _done(
        self, interaction: discord.Interaction, result: ControlResult, *, edited: int = 0
    ) -> None:
        text = control_answer(result)
        if edited:
            text += f" ({edited} cue message{'s' if edited > 1 else ''} updated)"
        await reply(interaction, text)

    @pause.autocomplete("run")
    @resume.autocomplete("run")
    @retry.autocomplete("run")
    @cancel.autocomplete("run")
    @skip.autocomplete("run")
    async def _runs_in_flight(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[int]]:
        return await self._run_choices(current, in_flight_only=True)

    async def _run_choices(self, current: str, *, in_flight_only: bool) -> list[app_commands.Choice[int]]:
        services = self.bot.services
        found = await views.list_runs(
            services.engine, in_flight_only=in_flight_only, limit=100, versions=services.versions
        )
        choices = []
        for r in found:
            name = f"{r.id} · {r.title}{' (' + r.scope + ')' if r.scope else ''} — {r.status}"
            if r.status == RunStatus.SCHEDULED:
                # A choice is plain text (no Discord timestamp), so the time carries its zone.
                name += f" for {schedule.shown(r.scheduled_for)}"
            if r.rehearsal:
                name += " · rehearsal"
            if matches(current, name):
                choices.append(app_commands.Choice(name=clip(name, 100), value=r.id))
        return choices[:MAX_CHOICES]

    @skip.autocomplete("step")
    async def _open_steps(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[int]]:
        run_id = getattr(interaction.namespace, "run", None)
        if not isinstance(run_id, int):
            return []
        services = self.bot.services
        run = await views.run_view(services.engine, run_id, services.versions)
        if run is None:
            return []
        choices = []
        for step in run.open_steps():
            words = "waiting for a GM" if step.parked else step.status
            name = f"{step.id} · {step.label} — {words}"
            if step.id is not None and matches(current, name):
                choices.append(app_commands.Choice(name=clip(name, 100), value=step.id))
        return choices[:MAX_CHOICES]

    # ── reading ───────────────────────────────────────────────────────────

    @app_commands.command(
        name="status", description="A run's phases, steps, due times and health", extras=READ
    )
    @app_commands.describe(run="The run (default: what is in flight)")
    async def status(self, interaction: discord.Interaction, run: int | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        services = self.bot.services
        # What the bot cannot do for the runs, said above whichever status is shown.
        warning = await listing_status_line(self.bot.mirror)
        if run is None:
            in_flight = await views.list_runs(
                services.engine, in_flight_only=True, versions=services.versions
            )
            if len(in_flight) != 1:
                await reply(interaction, warning, embed=rendering.runs_embed(in_flight))
                return
            run = in_flight[0].id
        found = await views.run_view(services.engine, run, services.versions)
        if found is None:
            raise BotError(f"There is no run {run}.")
        reminders = await views.reminders_of_run(services.engine, run)
        embed = rendering.status_embed(found, reminders)
        # Sign-ups (``bot.cogs.signups._view``): the counts per option, for a run whose event has them.
        embed = fit(with_signup_counts(embed, await signups.listing(services.engine, run)))
        await reply(interaction, warning, embed=embed)

    @status.autocomplete("run")
    async def _any_runs(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[int]]:
        return await self._run_choices(current, in_flight_only=False)

    @app_commands.command(
        name="health",
        description="Is the runner doing its job: database, bot processes, channel permissions, stuck runs",
        extras=READ,
    )
    async def health(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await reply(interaction, embed=health_embed(await bot_health(self.client, self.bot)))

    @app_commands.command(name="list", description="Published events and the runs in flight", extras=READ)
    async def list_(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        services = self.bot.services
        definitions = await views.list_definitions(
            services.engine, services.versions, now=services.clock.now()
        )
        runs = await views.list_runs(services.engine, in_flight_only=True, versions=services.versions)
        await reply(interaction, embed=rendering.list_embed(definitions, runs))

    @app_commands.command(
        name="upcoming", description="The next occurrences of scheduled events, per scope", extras=READ
    )
    @app_commands.describe(event="One event (default: every scheduled event)")
    async def upcoming(self, interaction: discord.Interaction, event: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        services = self.bot.services
        found = await views.upcoming(services.engine, services.versions, services.clock.now(), key=event)
        await reply(interaction, embed=rendering.upcoming_embed(found))

    @upcoming.autocomplete("event")
    async def _upcoming_events(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await self._definition_choices(current)

    # ── publishing ────────────────────────────────────────────────────────

    @app_commands.command(
        name="validate",
        description="Check an event definition (a YAML file) as the command line does; stores nothing",
        extras=PUBLISH,
    )
    @app_commands.describe(file="The event definition: a .yaml file")
    async def validate_file(self, interaction: discord.Interaction, file: discord.Attachment) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await validate_upload(self.bot, interaction, file)

    @app_commands.command(
        name="publish",
        description="Publish an event definition (a YAML file), after a preview of what it changes",
        extras=PUBLISH,
    )
    @app_commands.describe(file="The event definition: a .yaml file")
    async def publish_file(self, interaction: discord.Interaction, file: discord.Attachment) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await publish_upload(self.bot, interaction, file)


class StartAnyway(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=StartAnywayPress.TEMPLATE
):
    """ "Start anyway" under a preflight's problems. It pins the version that was checked: if the
    event was republished since, it refuses rather than start something nobody checked."""

    def __init__(
        self, key: str, version_id: int, scope: str, mode: StartMode, *, disabled: bool = False
    ) -> None:
        super().__init__(
            discord.ui.Button(
                label="Rehearse anyway" if mode == "r" else "Start anyway",
                style=discord.ButtonStyle.danger,
                custom_id=StartAnywayPress(key, version_id, scope, mode).custom_id,
                disabled=disabled,
            )
        )
        self.key, self.version_id, self.scope, self.mode = key, version_id, scope, mode

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> StartAnyway:
        press = StartAnywayPress.from_match(match)
        return cls(press.key, press.version_id, press.scope_token, press.mode)

    def capability(self) -> str:
        return "rehearse" if self.mode == "r" else "start"

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, self.capability())

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await self._confirmed(served(interaction), interaction)
        except Exception as exc:
            await reply_to_error(interaction, exc)

    async def _confirmed(self, bot: Served, interaction: discord.Interaction) -> None:
        rehearsal = self.mode == "r"
        view = discord.ui.View(timeout=None)
        view.add_item(StartAnyway(self.key, self.version_id, self.scope, self.mode, disabled=True))
        await interaction.response.edit_message(view=view)
        services = bot.services
        scope = await confirmed_scope(services, self.key, self.version_id, self.scope)
        result = await services.controls.start(
            self.key, scope=scope, actor=actor_of(interaction.user), rehearsal=rehearsal
        )
        await interaction.followup.send(control_answer(result), ephemeral=True)


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook`` as an extension (``bot.load_extension``)."""
    bot.add_dynamic_items(StartAnyway, PublishButton)
    await bot.add_cog(EventCog(served_by(bot), bot))
