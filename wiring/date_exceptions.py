"""``/event skip-date`` and ``/event move-date`` as a change to the definition: the current
version with one more ``skip`` or ``moves`` entry under its cron schedule, validated like any
other version (``runner.definitions.cron_dates``), for the caller to publish. Refusals name the
event and the date."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any

from pydantic import ValidationError

from runner.definitions import CronSchedule, EventDefinition
from runner.definitions.cron_dates import firings_on
from runner.errors import UserFacingError
from wiring.human_time import parse_when

DATE_EXAMPLE = '"2026-12-25"'


class DateRefused(UserFacingError):
    """That date cannot be skipped or moved."""


def _cron(definition: EventDefinition) -> CronSchedule:
    schedule = definition.schedule
    if not isinstance(schedule, CronSchedule):
        raise DateRefused(
            f"{definition.key} has no recurring (cron) schedule: only a recurring event has dates "
            "to skip or move (publish a new file to change a one-off event)."
        )
    return schedule


def _day(definition: EventDefinition, text: str, now: dt.datetime) -> dt.date:
    """The date typed, which must hold an occurrence still to come."""
    schedule = _cron(definition)
    typed = " ".join(text.split())[:40]
    try:
        day = dt.date.fromisoformat(typed)
    except ValueError:
        raise DateRefused(f"“{typed}” is not a date: write it as {DATE_EXAMPLE}.") from None
    firings = firings_on(schedule.cron, schedule.timezone, day)
    if not firings:
        raise DateRefused(f"{definition.key} has no occurrence on {day} ({day:%a}) in {schedule.timezone}.")
    if day in schedule.skip:
        raise DateRefused(f"{definition.key} is already skipped on {day}.")
    if all(f.astimezone(dt.UTC).replace(tzinfo=None) <= now for f in firings):
        raise DateRefused(f"{definition.key}'s occurrence on {day} has already begun.")
    return day


def _with_schedule(definition: EventDefinition, **changes: Any) -> EventDefinition:
    spec = definition.model_dump(mode="json")
    spec["schedule"].update(changes)
    try:
        return EventDefinition.model_validate(spec)
    except ValidationError as exc:
        words = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise DateRefused(f"{definition.key} cannot change so: {words}") from None


def skipped(definition: EventDefinition, text: str, now: dt.datetime) -> tuple[EventDefinition, dt.date]:
    """``definition`` with the date ``text`` skipped (a moved date's move is dropped too)."""
    schedule = _cron(definition)
    day = _day(definition, text, now)
    moves = {d.isoformat(): at.isoformat() for d, at in schedule.moves.items() if d != day}
    skip = [d.isoformat() for d in [*schedule.skip, day]]
    return _with_schedule(definition, skip=skip, moves=moves), day


def moved(
    definition: EventDefinition, text: str, to: str, now: dt.datetime
) -> tuple[EventDefinition, dt.date, dt.datetime]:
    """``definition`` with the date ``text``'s occurrence starting at ``to`` (the event's zone)."""
    schedule = _cron(definition)
    day = _day(definition, text, now)
    at = parse_when(to, now, schedule.timezone)
    local = at.astimezone(zoneinfo.ZoneInfo(schedule.timezone)).replace(tzinfo=None)
    moves = {d.isoformat(): a.isoformat() for d, a in schedule.moves.items()}
    moves[day.isoformat()] = local.isoformat()
    return _with_schedule(definition, moves=moves), day, local
