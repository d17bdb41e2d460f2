"""``/event create``, ``/event edit`` and ``/event export``: an event written, changed and taken
out from Discord, the YAML definition staying the one source of truth.

* ``/event create template:<name>`` opens a form (title, when, channel, capacity, key: those the
  template uses) and fills the template in (``wiring.event_templates``); ``/event edit
  event:<key>`` opens the form prefilled from the current version and changes those fields
  (``wiring.event_edits``). Either way the result is YAML that goes through exactly what an
  upload to ``/event publish`` goes through (``bot.cogs.publishing._flow``: the same check in a
  process of its own, the same preview of what changes, the same Publish and Cancel), shown
  with the YAML itself and the start time as a Discord timestamp, before anything is stored.
* ``/event export event:<key>`` attaches the current version's YAML.

A form's submit is read back from its custom id alone (``bot.custom_ids.EventForm``), in the
``on_interaction`` listener, so it works in whichever process claimed it and after a restart. It
is claimed and checked for ``publish`` as a button is; an edit's form pins the version it was
opened on and refuses if the event was published since.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Mapping
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from actions import limits
from bot import rendering
from bot.cogs.authoring._form import capacity_of, channel_text, form, submitted
from bot.cogs.publishing._flow import NOTHING_PUBLISHED, check_bytes, current_of, offer_preview
from bot.components import claimed_and_admitted
from bot.custom_ids import EventForm, parse
from bot.errors import BotError, reply_to_error
from bot.protocols import Served, served, served_by
from runner import views
from runner.definitions import EventDefinition
from runner.definitions.keys import key_problem
from wiring.event_edits import definition_data, edited, fields_of
from wiring.event_templates import as_yaml, fill, key_from_title, list_templates, load_template
from wiring.human_time import parse_when, shown_local

PUBLISH = {"capability": "publish"}
READ = {"capability": "staff"}
MAX_CHOICES = 25
CHOICE_MAX = 100
# Discord's attachment limit for a bot without boosts; a definition is far below it.
ATTACHMENT_MAX = 8 * 1024 * 1024
# ```yaml … ``` around the YAML in an embed's description.
FENCE = len("```yaml\n\n```")


def _matches(current: str, *texts: str) -> bool:
    needle = current.strip().lower()
    return not needle or any(needle in t.lower() for t in texts)


def yaml_answer(name: str, text: str) -> dict[str, Any]:
    """The YAML as an answer carries it: always attached (to edit and publish again), and shown
    in an embed when it fits one."""
    data = text.encode()
    if len(data) > ATTACHMENT_MAX:
        raise BotError(f"{name} would be {len(data) // 1024} KB, more than Discord takes as a file.")
    if len(text) + FENCE <= limits.EMBED_DESCRIPTION_MAX:
        shown = f"```yaml\n{text}\n```"
    else:
        shown = f"{text.count(chr(10))} lines: too long to show here, see the attached file."
    embed = discord.Embed(title=name, description=shown)
    return {"embed": embed, "file": discord.File(io.BytesIO(data), filename=name)}


def when_line(typed: str, at: dt.datetime) -> str:
    shown = " ".join(typed.split())[:60]
    return f"🕗 “{shown}” is {rendering.timestamp(at, 'F')} ({rendering.timestamp(at, 'R')})\n"


async def create(interaction: discord.Interaction, template: str) -> None:
    bot = served(interaction)
    found = load_template(template, bot.config.templates_dir)
    defaults: dict[str, str | None] = {f: found.defaults.get(f) for f in found.fields}
    modal = form(
        f"New event: {found.name}",
        EventForm(template=found.name),
        defaults,
        zone=bot.config.timezone,
        optional=("capacity", "key"),
    )
    await interaction.response.send_modal(modal)


async def edit(interaction: discord.Interaction, event: str) -> None:
    bot = served(interaction)
    definition, version_id, _ = await _current(bot, event)
    fields = fields_of(definition)
    zone = bot.config.timezone
    asked: dict[str, str | None] = {"title": fields.title}
    if fields.cron is None:
        asked["when"] = shown_local(fields.at, zone) if fields.at else None
    if fields.channel is not None:
        asked["channel"] = fields.channel
    if fields.has_signup:
        asked["capacity"] = str(fields.capacity) if fields.capacity else None
    modal = form(
        f"Edit {definition.key}",
        EventForm(key=definition.key, version_id=version_id),
        asked,
        zone=zone,
        optional=("when", "capacity"),
        when_empty="empty: by hand",
    )
    await interaction.response.send_modal(modal)


async def export(interaction: discord.Interaction, event: str) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    definition, _, number = await _current(bot, event)
    name = f"{definition.key}.yaml"
    text = as_yaml(definition_data(definition))
    head = (
        f"📄 **{rendering.clip(definition.title, 200)}** (`{definition.key}`), version {number}: its "
        f"YAML is attached. Edit it and attach it to /event publish to publish a new version."
    )
    await interaction.followup.send(head, ephemeral=True, **yaml_answer(name, text))


async def _current(bot: Served, key: str) -> tuple[EventDefinition, int, int]:
    current = await current_of(bot, key)
    if current is None:
        raise BotError(f"There is no published event `{key[:64]}`; /event list shows them.")
    if current.definition is None:
        raise BotError(
            f"Version {current.number} of `{key}` cannot be read ({current.unreadable}); publish a "
            "corrected file with /event publish."
        )
    return current.definition, current.version_id, current.number


async def on_form(interaction: discord.Interaction) -> None:
    """Every interaction reaches this listener; it acts on the submits of its own forms only."""
    if interaction.type is not discord.InteractionType.modal_submit:
        return
    data: Mapping[str, Any] = interaction.data or {}
    ids = parse(str(data.get("custom_id") or ""))
    if not isinstance(ids, EventForm):
        return
    try:
        if not await claimed_and_admitted(interaction, "publish"):
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        bot = served(interaction)
        values = submitted(interaction.data)
        if ids.template is not None:
            await _created(bot, interaction, ids.template, values)
        else:
            assert ids.key is not None and ids.version_id is not None
            await _edited(bot, interaction, ids.key, ids.version_id, values)
    except Exception as exc:
        await reply_to_error(interaction, exc)


async def _created(bot: Served, interaction: discord.Interaction, name: str, values: dict[str, str]) -> None:
    template = load_template(name, bot.config.templates_dir)
    title = values.get("title", "").strip()
    if "title" in template.fields and not title:
        raise BotError(f"Give the event a title. {NOTHING_PUBLISHED}")
    typed = values.get("when", "")
    at = (
        parse_when(typed, bot.services.clock.now(), bot.config.timezone)
        if "when" in template.fields
        else None
    )
    key = values.get("key", "").strip() or key_from_title(title, template.name)
    problem = key_problem(key)
    if problem:
        raise BotError(f"The key {problem}. {NOTHING_PUBLISHED}")
    if await current_of(bot, key) is not None:
        raise BotError(
            f"There is already an event `{key}`: /event edit event:{key} changes it, or give this one "
            f"another key. {NOTHING_PUBLISHED}"
        )
    data = fill(
        template,
        {
            "title": title,
            "when": at.isoformat() if at else None,
            "channel": channel_text(values.get("channel", "")),
            "capacity": capacity_of(values.get("capacity")),
            "key": key,
        },
    )
    await _preview(bot, interaction, key, as_yaml(data), f"discord:template {template.name}", typed, at)


async def _edited(
    bot: Served, interaction: discord.Interaction, key: str, version_id: int, values: dict[str, str]
) -> None:
    definition, current_id, number = await _current(bot, key)
    if current_id != version_id:
        raise BotError(
            f"`{key}` was published again since this form opened (it is at version {number} now): run "
            f"/event edit again. {NOTHING_PUBLISHED}"
        )
    fields = fields_of(definition)
    zone = bot.config.timezone
    typed = values.get("when", "").strip()
    at = fields.at
    changed_at = None
    if fields.cron is None and not (fields.at and typed == shown_local(fields.at, zone)):
        at = changed_at = parse_when(typed, bot.services.clock.now(), zone) if typed else None
    title = values.get("title", "").strip() or definition.title
    channel = channel_text(values["channel"]) if fields.channel is not None and "channel" in values else None
    capacity = capacity_of(values.get("capacity")) if fields.has_signup else None
    data = edited(definition, title=title, at=at, channel=channel or fields.channel, capacity=capacity)
    await _preview(bot, interaction, key, as_yaml(data), "discord:/event edit", typed, changed_at)


async def _preview(
    bot: Served,
    interaction: discord.Interaction,
    key: str,
    text: str,
    source: str,
    typed: str,
    at: dt.datetime | None,
) -> None:
    name = f"{key}.yaml"
    item = await check_bytes(bot, name, text.encode())
    lead = when_line(typed, at) if at is not None else ""
    await offer_preview(bot, interaction, item, source=source, lead=lead, **yaml_answer(name, text))


async def _templates(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    found = list_templates(served(interaction).config.templates_dir)
    return [
        app_commands.Choice(name=rendering.clip(f"{t.name}: {t.description}", CHOICE_MAX), value=t.name)
        for t in found
        if _matches(current, t.name, t.description)
    ][:MAX_CHOICES]


async def _events(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    services = served(interaction).services
    found = await views.list_definitions(services.engine, services.versions)
    return [
        app_commands.Choice(name=rendering.clip(f"{d.title} ({d.key})", CHOICE_MAX), value=d.key)
        for d in found
        if len(d.key) <= CHOICE_MAX and _matches(current, d.key, d.title)
    ][:MAX_CHOICES]


def add_commands(group: app_commands.Group) -> app_commands.Group:
    """``create``, ``edit`` and ``export`` added to ``/event`` (``group``): the running bot's and
    the one ``python -m bot sync`` publishes."""
    made: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="create",
        description="Create an event from a template, in a form; preview before publishing",
        callback=app_commands.describe(template="The template to start from")(create),
        parent=group,
        extras=PUBLISH,
    )
    made.autocomplete("template")(_templates)
    changed: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="edit",
        description="Change an event's title, time, channel or capacity; preview before publishing",
        callback=app_commands.describe(event="The event to change")(edit),
        parent=group,
        extras=PUBLISH,
    )
    changed.autocomplete("event")(_events)
    taken: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="export",
        description="The current version of an event as a YAML file",
        callback=app_commands.describe(event="The event")(export),
        parent=group,
        extras=READ,
    )
    taken.autocomplete("event")(_events)
    for command in (made, changed, taken):
        group.add_command(command)
    return group


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook`` after ``bot.cogs.control._cog``: adds ``create``, ``edit``
    and ``export`` to the ``/event`` group that cog made, and the listener that reads their
    forms' submits."""
    served_by(bot)
    group = bot.tree.get_command("event")
    assert isinstance(group, app_commands.Group), "bot.cogs.control._cog is loaded first"
    add_commands(group)
    bot.add_listener(on_form, "on_interaction")
