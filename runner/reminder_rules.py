"""A reminder's rules, apart from the statements that store it (``runner.sql.reminders``):
what it is called, when it is due, and so when a run with reminders first needs a tick."""

from __future__ import annotations

import datetime as dt

from runner.definitions import EventDefinition


def reminder_label(definition: EventDefinition, seq: int) -> str:
    reminder = definition.reminders[seq]
    # Staff tell a DM to the attendees from a channel message in /event status and the log.
    whom = " to attendees" if reminder.to == "attendees" else ""
    return reminder.label or f"Reminder{whom}, {reminder.shown_lead()} before"


def lead_of(definition: EventDefinition, seq: int) -> float | None:
    """How long before the start reminder ``seq`` goes; ``None`` when the definition (a version
    published since) has no such reminder."""
    return definition.reminders[seq].before if seq < len(definition.reminders) else None


def moment_of(definition: EventDefinition, seq: int, starts_at: dt.datetime) -> dt.datetime | None:
    """When reminder ``seq`` of an occurrence starting at ``starts_at`` is due; ``None`` when the
    definition has no such reminder."""
    lead = lead_of(definition, seq)
    return None if lead is None else starts_at - dt.timedelta(seconds=lead)


def earliest_due(definition: EventDefinition, starts_at: dt.datetime) -> dt.datetime:
    """A new run's first wake: its earliest reminder, or its start."""
    return starts_at - dt.timedelta(seconds=definition.longest_reminder_lead())
