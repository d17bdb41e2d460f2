"""A published definition as YAML again (``/event export``), and its common fields read and
changed (``/event edit``): the title, when it starts, its channel and its sign-up capacity.

The YAML leaves out what is at its default (``on_failure: pause``, ``grace_seconds: 900``), so
the file reads like the one staff wrote; ``definition_data`` checks that it reads back as the
same definition (the same content hash) and writes every field when it would not.

What "the channel" of an event is, where the issue is silent: the channel of its first
announcement (or, lacking one, of its sign-up message). Changing it changes every place that
names that same channel (steps, reminders, the sign-up message) and no other, so a cue in the GM
channel stays there.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runner.definitions import CronSchedule, EventDefinition, OnceSchedule
from runner.definitions.durations import shown_duration
from runner.definitions.model import ManualSchedule
from runner.errors import UserFacingError

ANNOUNCE = "discord.announce"


class EditError(UserFacingError):
    """That change cannot be made from the form."""


def definition_data(definition: EventDefinition) -> dict[str, Any]:
    """The definition as the data of a YAML file that reads back as the same definition."""
    data = definition.model_dump(mode="json", exclude_defaults=True)
    # The schedule's ``kind`` is its default, so it was left out with the rest: written as staff
    # write it, or a manual schedule not at all.
    schedule = definition.schedule
    if isinstance(schedule, OnceSchedule):
        data["schedule"] = {"once": schedule.at.isoformat()}
    elif isinstance(schedule, CronSchedule):
        data["schedule"] = {"cron": schedule.cron, "timezone": schedule.timezone}
    else:
        data.pop("schedule", None)
    _durations_as_written(data)
    ordered = {"key": definition.key, "title": definition.title, **data}
    if EventDefinition.model_validate(ordered).content_hash() == definition.content_hash():
        return ordered
    return definition.model_dump(mode="json")  # pragma: no cover - every field, as stored


def _durations_as_written(data: dict[str, Any]) -> None:
    """Durations stored as seconds written back as staff write them (``7200.0`` → ``2h``)."""

    def shown(holder: dict[str, Any], key: str) -> None:
        if isinstance(holder.get(key), int | float) and not isinstance(holder[key], bool):
            holder[key] = shown_duration(holder[key])

    shown(data, "duration")
    for reminder in data.get("reminders") or []:
        shown(reminder, "before")
    if isinstance(data.get("signup"), dict):
        shown(data["signup"], "closes")
        shown(data["signup"], "late_cancel")


@dataclass(frozen=True)
class Fields:
    """The common fields as the form shows them. ``None``: the event has no such field (no
    announcement channel, no sign-up), so the form does not ask."""

    title: str
    # When a ``once`` event starts; ``None`` for a manual one; a cron event's is not offered.
    at: dt.datetime | None
    cron: str | None
    channel: str | None
    capacity: int | None
    has_signup: bool


def _channel_refs(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every mapping in the definition's data whose ``channel`` names a channel."""
    signup = data.get("signup")
    if isinstance(signup, dict):
        yield signup
    for reminder in data.get("reminders") or []:
        yield reminder.get("params", reminder)
    for phase in data.get("phases") or []:
        for step in phase.get("steps") or []:
            yield step.get("params") or {}


def channel_of(definition: EventDefinition) -> str | None:
    for phase in definition.phases:
        for step in phase.steps:
            if step.action == ANNOUNCE and isinstance(step.params.get("channel"), str):
                return str(step.params["channel"])
    if definition.signup is not None and definition.signup.channel:
        return definition.signup.channel
    return None


def fields_of(definition: EventDefinition) -> Fields:
    schedule = definition.schedule
    return Fields(
        title=definition.title,
        at=schedule.at if isinstance(schedule, OnceSchedule) else None,
        cron=schedule.cron if isinstance(schedule, CronSchedule) else None,
        channel=channel_of(definition),
        capacity=definition.signup.capacity if definition.signup else None,
        has_signup=definition.signup is not None,
    )


def edited(
    definition: EventDefinition,
    *,
    title: str,
    at: dt.datetime | None,
    channel: str | None,
    capacity: int | None,
) -> dict[str, Any]:
    """The definition's data with the form's fields in place: ``at`` ``None`` makes it started by
    hand (it is not offered for a cron event, whose schedule is left as it is), ``channel``
    replaces the event's channel wherever it is named, ``capacity`` ``None`` takes the sign-up's
    overall limit off."""
    data = definition_data(definition)
    data["title"] = title
    if not isinstance(definition.schedule, CronSchedule):
        if at is None:
            data.pop("schedule", None)
        else:
            data["schedule"] = {"once": at.isoformat()}
        if at is None and not isinstance(definition.schedule, ManualSchedule):
            # Reminders and the Events tab need a time; a manual event has neither.
            data.pop("reminders", None)
    old = channel_of(definition)
    if channel is not None and old is not None and channel != old:
        for holder in _channel_refs(data):
            if holder.get("channel") == old:
                holder["channel"] = channel
    if capacity is not None and definition.signup is None:
        raise EditError(f"**{definition.title}** has no sign-ups, so it has no capacity to change.")
    signup = data.get("signup")
    if isinstance(signup, dict):
        if capacity is None:
            signup.pop("capacity", None)
        else:
            signup["capacity"] = capacity
    return data
