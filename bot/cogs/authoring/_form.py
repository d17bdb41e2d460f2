"""The form (a Discord modal) of ``/event create`` and ``/event edit``, and what a submit says.

A modal holds at most five text inputs: title, when, channel, capacity and key are five, and a
form asks only those its template or event has. The channel is typed (an alias from the config,
``#alias`` or a channel id, as a definition names it; a pasted ``<#id>`` mention is read as the
id), not picked from a select: a select in a modal is too new for every client, and a
follow-up select would be a second step. The check of the filled-in definition says when the
channel is not one the config knows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import discord

from bot.custom_ids import EventForm
from bot.errors import BotError
from runner.definitions.signup import MAX_CAPACITY
from wiring.human_time import WHEN_MAX

# Discord's limits: a modal's title and an input's label, 45 characters; a placeholder, 100.
TITLE_MAX = 45
LABEL_MAX = 45
WHEN_EXAMPLES = "friday 20:00 · tomorrow 8pm · in 2h · 2026-12-12 20:00"
_MENTION = re.compile(r"<#([0-9]{15,21})>")


def _input(
    field: str,
    label: str,
    *,
    default: str | None = None,
    required: bool = True,
    max_length: int = 100,
    placeholder: str | None = None,
) -> discord.ui.TextInput[Any]:
    return discord.ui.TextInput(
        label=label[:LABEL_MAX],
        custom_id=field,
        # A template's default longer than the input takes would have Discord refuse the form.
        default=(default or "")[:max_length] or None,
        required=required,
        max_length=max_length,
        placeholder=placeholder[:100] if placeholder else None,
    )


def form(
    title: str,
    ids: EventForm,
    fields: Mapping[str, str | None],
    *,
    zone: str,
    optional: tuple[str, ...] = (),
    when_empty: str = "",
) -> discord.ui.Modal:
    """A modal asking ``fields`` (name → what it starts with), in the order given."""
    modal = discord.ui.Modal(title=title[:TITLE_MAX], custom_id=ids.custom_id, timeout=15 * 60)
    for field, default in fields.items():
        required = field not in optional
        if field == "title":
            modal.add_item(_input("title", "Title", default=default, max_length=200))
        elif field == "when":
            label = f"When ({zone}{'; ' + when_empty if when_empty and not required else ''})"
            if len(label) > LABEL_MAX:
                label = f"When ({zone})" if len(zone) < LABEL_MAX - 7 else "When"
            modal.add_item(
                _input(
                    "when",
                    label,
                    default=default,
                    required=required,
                    max_length=WHEN_MAX,
                    placeholder=WHEN_EXAMPLES,
                )
            )
        elif field == "channel":
            modal.add_item(
                _input(
                    "channel", "Channel (alias, #alias or id)", default=default, placeholder="announcements"
                )
            )
        elif field == "capacity":
            modal.add_item(
                _input(
                    "capacity",
                    "Capacity (empty: no overall limit)",
                    default=default,
                    required=False,
                    max_length=4,
                    placeholder=f"1 to {MAX_CAPACITY}",
                )
            )
        elif field == "key":
            modal.add_item(
                _input(
                    "key",
                    "Key (empty: made from the title)",
                    default=default,
                    required=False,
                    max_length=64,
                    placeholder="raid-night",
                )
            )
    return modal


def _leaves(components: Any) -> Iterator[Mapping[str, Any]]:
    for component in components or []:
        if not isinstance(component, Mapping):
            continue
        if "components" in component:
            yield from _leaves(component["components"])
        elif "component" in component:
            yield from _leaves([component["component"]])
        else:
            yield component


def submitted(data: Mapping[str, Any] | None) -> dict[str, str]:
    """Each text input's value by its custom id, from a modal submit's ``data``."""
    values = {}
    for leaf in _leaves((data or {}).get("components")):
        if isinstance(leaf.get("custom_id"), str) and isinstance(leaf.get("value"), str):
            values[leaf["custom_id"]] = leaf["value"]
    return values


def channel_text(typed: str) -> str:
    """The channel as a definition names it: a pasted mention becomes its id."""
    text = typed.strip()
    mention = _MENTION.fullmatch(text)
    return mention.group(1) if mention else text


def capacity_of(typed: str | None) -> int | None:
    text = (typed or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_CAPACITY:
        raise BotError(
            f"Capacity “{text[:20]}” is not a whole number from 1 to {MAX_CAPACITY}. Nothing was published."
        )
    return int(text)
