"""``/event validate`` and ``/event publish``: an event definition attached to the command, checked
exactly as the command line checks a file, and published from Discord after a preview.

The choices, where the issue leaves them open:

* **The upload.** At most ``MAX_UPLOAD_BYTES`` (256 KB, far above any real definition; the
  examples are under 5 KB), refused from the size Discord reports before a byte is downloaded,
  and again if the download turns out larger. It is decoded and parsed as the command line
  reads a file (``runner.yaml_text``); a file that is not UTF-8, not YAML or not a mapping is
  refused in one sentence saying which. The rest is checked by the command line's own functions
  (``wiring.definition_checks``: the schema and every step's params, then every alias against
  this bot's config), so a file passes here exactly when ``python -m bot validate --config
  <this config>`` passes it. Every problem is listed, each line as the command line prints it
  (the file named once, at the top), fitted to Discord's 2,000 characters (what does not fit is
  counted). A file refused, or with a problem, stores nothing.
* **The preview.** ``/event publish`` of a valid file answers (ephemerally) with what changes
  against the current version (``runner.definitions.diff``), or "new event", or "unchanged:
  nothing to publish" (no buttons), with Publish and Cancel buttons. The draft waits in this
  process's memory (``bot.cogs.publishing._drafts``), keyed by a random token in the buttons' custom id
  (``bot.custom_ids.PublishPress``), for 15 minutes on the bot's clock; pressed later, or after a
  restart, a button says the preview expired and that nothing was published.
* **The press.** Only the member who asked may press (and only while they still hold
  ``publish``); anyone else is refused and nothing changes. The preview pins the version it was
  compared with: if the event was published since (from Discord or the command line), Publish
  refuses ("the event changed since this preview") and stores nothing; the check and the
  publish hold one lock (``Drafts.publishing``), so two presses in this process cannot both
  pass it (a ``python -m bot publish`` in that same instant still could). Otherwise it calls
  ``runner.catalog.publish`` as ``python -m bot publish`` does, with the member as the actor and
  ``discord:<file name>`` as the version's source. Cancel stores nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
from typing import Any

import discord

from actions import limits, validation_registry
from bot import rendering
from bot.cogs.publishing import _checks as upload_checks
from bot.cogs.publishing._drafts import Draft
from bot.components import claimed_and_admitted
from bot.custom_ids import PublishPress, PublishVerb
from bot.errors import BotError, reply_to_error
from bot.permissions import actor_of
from bot.protocols import Served, served
from runner import catalog, schedule, views, yaml_text
from runner.bus import VersionPublished
from runner.definitions import EventDefinition, parse_yaml
from runner.definitions.diff import changes
from runner.errors import DefinitionError, Problem, UnknownDefinition, UnreadableDefinition
from wiring.config import Config
from wiring.definition_checks import (
    CheckedFile,
    check_aliases,
    check_parsed,
    checks_aliases,
    next_lines,
    warnings,
)

MAX_UPLOAD_BYTES = 256 * 1024
# An upload is read and checked within this (in a process of its own, ``bot.cogs.publishing._checks``):
# the worst file under the size cap takes about a second; past this, it is refused.
CHECK_SECONDS = 5.0
# A problem or a change longer than this is clipped, so one cannot crowd out the rest.
LINE_MAX = 300
NOTHING_PUBLISHED = "Nothing was published."


def _kilobytes(size: int) -> str:
    return f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} bytes"


async def read_upload(attachment: discord.Attachment) -> bytes:
    """The attachment's bytes, or a ``BotError`` saying why it cannot be read."""
    too_large = (
        f"{attachment.filename} is {{size}}; an event definition may be at most "
        f"{_kilobytes(MAX_UPLOAD_BYTES)}. Nothing was stored."
    )
    if attachment.size > MAX_UPLOAD_BYTES:
        raise BotError(too_large.format(size=_kilobytes(attachment.size)))
    try:
        data = await attachment.read()
    except discord.HTTPException as exc:
        raise BotError(
            f"I could not download {attachment.filename} from Discord ({exc.status}); attach it "
            "again. Nothing was stored."
        ) from None
    if len(data) > MAX_UPLOAD_BYTES:
        raise BotError(too_large.format(size=_kilobytes(len(data))))
    return data


def _kind(raw: Any) -> str:
    if raw is None:
        return "nothing (the file is empty)"
    if isinstance(raw, list):
        return "a list"
    if isinstance(raw, str):
        return "a line of text"
    return f"a single value ({type(raw).__name__})"


def read_definition(name: str, data: bytes) -> dict[str, Any]:
    """The upload's YAML, read as the command line reads a file (``runner.yaml_text``), or a
    ``BotError`` saying in a sentence why it is not an event definition at all."""
    try:
        text = yaml_text.decode(data)
    except yaml_text.YamlError as exc:
        raise BotError(f"{name} cannot be read: {exc}. Nothing was stored.") from None
    try:
        raw = parse_yaml(text, file=name)
    except DefinitionError as exc:
        raise BotError(f"{name} is not valid YAML: {exc.problems[0].message}. Nothing was stored.") from None
    if not isinstance(raw, dict):
        raise BotError(
            f"{name} is not an event definition: it holds {_kind(raw)}, where a definition is a "
            "mapping of fields (key: …, title: …, phases: …). Nothing was stored."
        )
    return raw


def _read_and_check(name: str, data: bytes, now: dt.datetime, config: Config | None) -> CheckedFile:
    """The whole check of an upload, run in the checking process: what it sends back is only
    the verdict (the data as read stays there)."""
    item = check_parsed(name, read_definition(name, data), validation_registry(), now=now)
    if config is not None and checks_aliases(config):
        asyncio.run(check_aliases([item], config))
    item.raw = None
    return item


async def check_upload(bot: Served, attachment: discord.Attachment) -> CheckedFile:
    """The attachment checked as ``python -m bot validate`` checks a file, with this bot's config.

    Reading and checking run in a process of their own with a time cap (``bot.cogs.publishing._checks``):
    every check is linear and bounded by its limit first, but 256 KB of YAML still takes a
    second to read, and on the event loop (or in a thread, through the GIL) that second would
    hold up every click, tick and lease renewal of the bot."""
    return await check_bytes(bot, attachment.filename, await read_upload(attachment))


async def check_bytes(bot: Served, name: str, data: bytes) -> CheckedFile:
    """``data`` (a definition's YAML, named ``name``) checked as an upload is: ``/event create``
    and ``/event edit`` hand their filled-in YAML here."""
    job = (name, data, bot.services.clock.now(), bot.config)
    try:
        return await asyncio.to_thread(upload_checks.run_capped, _read_and_check, job, CHECK_SECONDS)
    except upload_checks.TookTooLong:
        raise BotError(
            f"{name} took more than {CHECK_SECONDS:g} s to check, so it was not: make it smaller "
            "(fewer phases, steps or scopes). Nothing was stored."
        ) from None
    except upload_checks.CheckerDied:
        raise BotError(
            f"{name} could not be checked (the check stopped); attach it again. Nothing was stored."
        ) from None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def problem_line(problem: Problem) -> str:
    """The line ``python -m bot validate`` prints for ``problem``, without the file's name in
    front (the reply names the file once, at the top)."""
    line = str(problem)
    for sep in (", ", ": "):
        lead = f"{problem.file}{sep}"
        if problem.file and line.startswith(lead):
            return line[len(lead) :]
    return str(dataclasses.replace(problem, file=None))


def problems_text(item: CheckedFile, outcome: str) -> str:
    """Every problem, one a line, each where the command line says it is (the file, named once
    at the top, is left out of each line)."""
    head = f"❌ **{item.path.name}**: {_plural(len(item.problems), 'problem')}. {outcome}\n"
    lines = [f"• {problem_line(p)}" for p in item.problems]
    return rendering.fit_list(head, lines, limits.CONTENT_MAX, sep="\n", item_max=LINE_MAX)


def summary(definition: EventDefinition) -> str:
    steps = sum(len(phase.steps) for phase in definition.phases)
    scopes = f"scopes {', '.join(definition.scopes)}" if definition.scopes else "no scopes"
    return (
        f"{_plural(len(definition.phases), 'phase')}, {_plural(steps, 'step')}, {scopes}, "
        f"{schedule.describe(definition.schedule)}"
    )


def _name(definition: EventDefinition) -> str:
    return f"**{rendering.clip(definition.title, 200)}** (`{definition.key}`)"


async def validate_upload(
    bot: Served, interaction: discord.Interaction, attachment: discord.Attachment
) -> None:
    """``/event validate``: the check alone; nothing is stored either way."""
    item = await check_upload(bot, attachment)
    if not item.valid:
        await _reply(interaction, problems_text(item, "It would not publish."))
        return
    assert item.definition is not None
    lines = [f"✅ **{item.path.name}** is valid: {_name(item.definition)}, {summary(item.definition)}"]
    lines += [f"⚠️ {warning}" for warning in warnings(item.definition)]
    lines += next_lines(item.definition, bot.services.clock.now())
    lines.append("Nothing was stored: /event publish publishes it.")
    await _reply(interaction, "\n".join(lines))


@dataclasses.dataclass(frozen=True)
class Current:
    """What the event is now: its version id and number, and the definition (``None`` when
    that version cannot be read, with the reason)."""

    version_id: int
    number: int
    definition: EventDefinition | None
    unreadable: str | None = None


async def current_of(bot: Served, key: str) -> Current | None:
    services = bot.services
    try:
        found = await views.current_definition(services.engine, key, services.versions)
    except UnknownDefinition:
        return None
    except UnreadableDefinition as exc:
        return Current(exc.version_id, exc.version or 0, None, exc.reason)
    listed = await views.list_definitions(services.engine, services.versions)
    number = next((d.version for d in listed if d.key == key), 0)
    return Current(found.version_id, number, found.definition)


async def publish_upload(
    bot: Served, interaction: discord.Interaction, attachment: discord.Attachment
) -> None:
    """``/event publish``: the check, then the preview with its buttons (nothing stored yet)."""
    item = await check_upload(bot, attachment)
    await offer_preview(bot, interaction, item, source=f"discord:{item.path.name}")


async def offer_preview(
    bot: Served,
    interaction: discord.Interaction,
    item: CheckedFile,
    *,
    source: str,
    lead: str = "",
    **fields: Any,
) -> None:
    """A checked definition's problems, or its preview with Publish and Cancel (``lead``: lines
    above it, ``fields``: what else the answer carries, as ``/event create`` adds its YAML)."""
    if not item.valid:
        await _reply(interaction, problems_text(item, NOTHING_PUBLISHED))
        return
    definition = item.definition
    assert definition is not None
    current = await current_of(bot, definition.key)
    if current is not None and current.definition is not None:
        if current.definition.content_hash() == definition.content_hash():
            await _reply(
                interaction,
                f"{_name(definition)} is unchanged: nothing to publish (version {current.number}, "
                f"the current one, is exactly this file). {NOTHING_PUBLISHED}",
            )
            return
    now = bot.services.clock.now()
    draft = bot.publish_drafts.add(
        user_id=interaction.user.id,
        definition=definition,
        source=source,
        base_version_id=current.version_id if current else None,
        number=current.number + 1 if current else 1,
        now=now,
    )
    text = lead + preview_text(draft, current, room=limits.CONTENT_MAX - len(lead))
    await _reply(interaction, text, view=publish_view(draft.token), **fields)


def preview_text(draft: Draft, current: Current | None, room: int = limits.CONTENT_MAX) -> str:
    definition = draft.definition
    tail = (
        f"\nPublish stores it as version {draft.number}; Cancel leaves everything as it is. "
        f"This preview expires {rendering.timestamp(draft.expires_at)}."
    )
    if current is None:
        head = f"🆕 {_name(definition)}: a new event, from {draft.source.removeprefix('discord:')}\n"
        notes = [summary(definition), *(f"⚠️ {warning}" for warning in warnings(definition))]
        return rendering.fit_list(head, notes, room, sep="\n", tail=tail)
    head = (
        f"📝 {_name(definition)}: version {current.number} → {draft.number}, from "
        f"{draft.source.removeprefix('discord:')}\n"
    )
    if current.definition is None:
        found = [f"the current version cannot be read ({current.unreadable}); this one replaces it"]
    else:
        # Never empty when the hashes differ (every field is compared); a blank preview never shows.
        found = changes(current.definition, definition) or ["no change a person would see"]
    lines = [f"• {line}" for line in found] + [f"⚠️ {warning}" for warning in warnings(definition)]
    return rendering.fit_list(head, lines, room, sep="\n", tail=tail, item_max=LINE_MAX)


def publish_view(token: str, *, disabled: bool = False) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(PublishButton(token, "publish", disabled=disabled))
    view.add_item(PublishButton(token, "cancel", disabled=disabled))
    return view


async def _reply(interaction: discord.Interaction, text: str, **fields: Any) -> None:
    await interaction.followup.send(rendering.clip(text, limits.CONTENT_MAX), ephemeral=True, **fields)


class PublishButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=PublishPress.TEMPLATE
):
    """Publish or Cancel under a preview; the draft it names is in ``bot.cogs.publishing._drafts``."""

    def __init__(self, token: str, verb: PublishVerb, *, disabled: bool = False) -> None:
        publish = verb == "publish"
        super().__init__(
            discord.ui.Button(
                label="Publish" if publish else "Cancel",
                style=discord.ButtonStyle.success if publish else discord.ButtonStyle.secondary,
                custom_id=PublishPress(token, verb).custom_id,
                disabled=disabled,
            )
        )
        self.token, self.verb = token, verb

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> PublishButton:
        press = PublishPress.from_match(match)
        return cls(press.token, press.verb)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, "publish")

    async def callback(self, interaction: discord.Interaction) -> None:
        # A DynamicItem's errors reach no View.on_error: the boundary is invoked here.
        try:
            await self._pressed(served(interaction), interaction)
        except Exception as exc:
            await reply_to_error(interaction, exc)

    async def _pressed(self, bot: Served, interaction: discord.Interaction) -> None:
        drafts = bot.publish_drafts
        draft = drafts.get(self.token, bot.services.clock.now())
        if draft is None:
            await interaction.response.send_message(
                f"This preview expired; run /event publish again. {NOTHING_PUBLISHED}", ephemeral=True
            )
            return
        if draft.user_id != interaction.user.id:
            await interaction.response.send_message(
                f"Only <@{draft.user_id}>, who asked for this preview, can press its buttons. "
                f"{NOTHING_PUBLISHED}",
                ephemeral=True,
            )
            return
        drafts.take(self.token)
        done = publish_view(self.token, disabled=True)
        if self.verb == "cancel":
            await interaction.response.edit_message(
                content=f"Cancelled {_name(draft.definition)}. {NOTHING_PUBLISHED}", view=done
            )
            return
        await interaction.response.defer()
        async with drafts.publishing:
            text = await publish_draft(bot, interaction, draft)
        await interaction.edit_original_response(content=text, view=done)


async def publish_draft(bot: Served, interaction: discord.Interaction, draft: Draft) -> str:
    """Publish ``draft`` unless the event moved on since its preview; what happened, in words."""
    definition = draft.definition
    current = await current_of(bot, definition.key)
    if (current.version_id if current else None) != draft.base_version_id:
        now_at = f"it is at version {current.number} now" if current else "it is no longer published"
        return (
            f"The event changed since this preview ({now_at}): {_name(definition)} was not "
            f"published. Run /event publish again to see what your file changes now."
        )
    services = bot.services
    published = await catalog.publish(
        services.engine,
        definition,
        services.clock.now(),
        source=draft.source,
        actor=actor_of(interaction.user),
    )
    # The schedule (occurrences, reminders, the Events tab) follows the new version at once.
    services.runner.bus.publish(VersionPublished(definition.key))
    if not published.changed:
        return f"{_name(definition)} is unchanged: nothing to publish. {NOTHING_PUBLISHED}"
    return f"✅ Published {_name(definition)} as version {published.version}."
