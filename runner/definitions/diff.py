"""What a new version of an event changes against the current one, as lines a moderator reads
before pressing Publish (``/event publish``): the event's own fields (title, schedule, grace,
scopes, ...), its reminders, its phases and, within a phase both versions have, its steps.

Pure: two ``EventDefinition`` in, a list of lines out, nothing read or written. A step has no id
before it is run, so steps are matched by their label (the name an author gave it); steps
without one are matched by action, in order, and named for it. A phase is matched by its key,
a reminder by how long before the start it goes out (no two reminders share one).

An empty list means the two versions are identical in every field a line could name; a field
this module has no words for yet still gets a line (``<field> changed``), so nothing that a
publish would change is ever left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from runner import schedule
from runner.definitions.durations import shown_duration
from runner.definitions.model import (
    DiscordEventDefinition,
    EventDefinition,
    PhaseDefinition,
    ReminderDefinition,
    StepDefinition,
)
from runner.errors import ordinal

# The event's fields whose lines are made below rather than field by field.
_OWN_LINES = ("phases", "reminders", "scopes", "description")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")


def changes(old: EventDefinition, new: EventDefinition) -> list[str]:
    """Every change from ``old`` (the current version) to ``new``, event fields first, then
    reminders, then phases in ``new``'s order (removed ones last)."""
    lines: list[str] = []
    for name in type(new).model_fields:
        if name in _OWN_LINES:
            continue
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            lines.append(f"{name}: {_shown(name, before)} → {_shown(name, after)}")
    if old.description != new.description:
        lines.append("description: changed" if new.description else "description: removed")
    lines.extend(_listed("scopes added", [s for s in new.scopes if s not in old.scopes]))
    lines.extend(_listed("scopes removed", [s for s in old.scopes if s not in new.scopes]))
    lines.extend(_reminder_changes(old.reminders, new.reminders))
    lines.extend(_phase_changes(old.phases, new.phases))
    return lines


def _shown(name: str, value: Any) -> str:
    if name == "schedule":
        return schedule.describe(value)
    if name in ("grace_seconds", "duration"):
        return "none" if value is None else shown_duration(value)
    if name == "discord_event":
        return _shown_mirror(value)
    if value is None:
        return "none"
    return repr(value)


def _shown_mirror(value: DiscordEventDefinition | bool | None) -> str:
    if value is None:
        return "as the config says"
    if isinstance(value, DiscordEventDefinition):
        return f"listed at {value.location!r}"
    return "listed" if value else "not listed"


def _listed(head: str, items: Sequence[str]) -> list[str]:
    return [f"{head}: {', '.join(items)}"] if items else []


def _reminder_changes(old: Sequence[ReminderDefinition], new: Sequence[ReminderDefinition]) -> list[str]:
    before = {r.before: r for r in old}
    after = {r.before: r for r in new}
    lines = []
    for lead, reminder in after.items():
        name = f"reminder {reminder.shown_lead()} before"
        if lead not in before:
            lines.append(f"{name}: added")
        elif before[lead] != reminder:
            what = _differing(before[lead], reminder)
            lines.append(f"{name}: {'; '.join(what)}")
    lines.extend(
        f"reminder {reminder.shown_lead()} before: removed"
        for lead, reminder in before.items()
        if lead not in after
    )
    return lines


def _phase_changes(old: Sequence[PhaseDefinition], new: Sequence[PhaseDefinition]) -> list[str]:
    before = {p.key: p for p in old}
    after = {p.key: p for p in new}
    lines = []
    for phase in new:
        name = f"phase {phase.key!r}"
        if phase.key not in before:
            lines.append(f"{name} ({phase.label}): added, with {_count(len(phase.steps))}")
            continue
        previous = before[phase.key]
        if previous.label != phase.label:
            lines.append(f"{name}: label {previous.label!r} → {phase.label!r}")
        lines.extend(f"{name}: {line}" for line in _step_changes(previous.steps, phase.steps))
    lines.extend(
        f"phase {p.key!r} ({p.label}): removed, with its {_count(len(p.steps))}"
        for p in old
        if p.key not in after
    )
    kept_before = [p.key for p in old if p.key in after]
    kept_after = [p.key for p in new if p.key in before]
    if kept_before != kept_after:
        lines.append(f"phases reordered: {', '.join(kept_before)} → {', '.join(kept_after)}")
    return lines


StepKey = tuple[str | None, str | None, int]


def _step_keys(steps: Iterable[StepDefinition]) -> list[StepKey]:
    """(label, action if unlabelled, how many such came before): the same step in two versions
    has the same key while its label stays, whatever moves around it."""
    seen: Counter[tuple[str | None, str | None]] = Counter()
    keys = []
    for step in steps:
        base = (step.label, None) if step.label else (None, step.action)
        keys.append((*base, seen[base]))
        seen[base] += 1
    return keys


def _step_name(key: StepKey) -> str:
    label, action, nth = key
    if label is not None:
        return f"step {label!r}" + (f" (the {_ordinal(nth)} of that label)" if nth else "")
    return f"the {_ordinal(nth)} unlabelled {action} step"


def _ordinal(index: int) -> str:
    return _ORDINALS[index] if index < len(_ORDINALS) else ordinal(index + 1)


def _step_changes(old: Sequence[StepDefinition], new: Sequence[StepDefinition]) -> list[str]:
    before = dict(zip(_step_keys(old), old, strict=True))
    after = dict(zip(_step_keys(new), new, strict=True))
    lines = []
    for key, step in after.items():
        if key not in before:
            lines.append(f"{_step_name(key)}: added" + (f" ({step.action})" if step.label else ""))
        elif before[key] != step:
            lines.append(f"{_step_name(key)}: {'; '.join(_differing(before[key], step))}")
    lines.extend(f"{_step_name(key)}: removed" for key in before if key not in after)
    kept_before = [key for key in before if key in after]
    kept_after = [key for key in after if key in before]
    if kept_before != kept_after:
        lines.append("steps reordered")
    return lines


def _differing(
    old: StepDefinition | ReminderDefinition, new: StepDefinition | ReminderDefinition
) -> list[str]:
    """What differs between two versions of one step (or reminder): ``action a → b``,
    ``on_failure a → b``, its params changed, added or removed, by name, and any other field
    by its name."""
    what = []
    for name in type(new).model_fields:
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        if name == "params":
            what.extend(_param_changes(before, after))
        elif name in ("action", "on_failure"):
            what.append(f"{name} {before} → {after}")
        else:
            what.append(name)
    return what


def _param_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    changed = [k for k in new if k in old and old[k] != new[k]]
    return [
        f"{', '.join(keys)} {verb}"
        for verb, keys in (("changed", changed), ("added", added), ("removed", removed))
        if keys
    ]


def _count(steps: int) -> str:
    return f"{steps} step{'s' if steps != 1 else ''}"
