"""Validation with locations: every problem at once, each naming the file, the phase key, the
step index and the field, so an author can fix a definition in one pass. Params are checked
against the params model the named action declares, so a definition that publishes is one every
step of which its action will accept."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ValidationError

from runner import limits, placeholders
from runner.clock import to_naive_utc
from runner.definitions.conditions import condition_problems
from runner.definitions.model import (
    DUPLICATE_PHASES,
    REMINDER_OWN,
    CronSchedule,
    EventDefinition,
    OnceSchedule,
    StepDefinition,
    _shortest_gap_seconds,
    reminder_action,
)
from runner.definitions.signup import SIGNUP_ACTION
from runner.definitions.signup import placeholder_problems as signup_placeholder_problems
from runner.definitions.sizes import (
    oversize_problems,
    too_many_phases,
    too_many_scopes,
    too_many_steps,
    values_problem,
    within_limits,
)
from runner.definitions.words import worded
from runner.errors import DefinitionError, Problem
from runner.registry import ActionRegistry
from runner.suggestions import did_you_mean


def publication_problems(
    definition: EventDefinition, file: str | None, now: dt.datetime | None = None
) -> list[Problem]:
    """What a new version may not be, though a stored one may (so every version published
    before a limit was set still loads and runs): the size and schedule limits of
    ``runner.limits``, placeholders in step labels (a cue's title defaults to its label), and a
    ``once`` that is already over (``now``: naive UTC, the wall clock when not given)."""
    problems: list[Problem] = []

    def refuse(message: str, field: str, phase: str | None = None, step: int | None = None) -> None:
        problems.append(Problem(message, file=file, phase=phase, step=step, field=field))

    scopes = definition.run_scopes()
    if len(definition.scopes) > limits.MAX_SCOPES:
        refuse(too_many_scopes(len(definition.scopes)), "scopes")
    if len(definition.phases) > limits.MAX_PHASES:
        refuse(too_many_phases(len(definition.phases)), "phases")
    total = sum(len(p.steps) for p in definition.phases)
    if total > limits.MAX_STEPS:
        refuse(too_many_steps(total), "phases")
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            problem = placeholders.problem(step.label) if step.label else None
            if problem:
                refuse(problem, "label", phase=phase.key, step=index)
    widest = max(definition.phases, key=lambda p: len(p.steps))
    at_once = len(scopes) * len(widest.steps)
    if len(definition.scopes) <= limits.MAX_SCOPES and at_once > limits.MAX_FANOUT_STEPS:
        refuse(
            f"{len(scopes)} scopes times the {len(widest.steps)} steps of phase {widest.key!r} is "
            f"{at_once} steps created at once; at most {limits.MAX_FANOUT_STEPS} (fewer scopes, "
            "or shorter phases)",
            "scopes",
        )
    if isinstance(definition.schedule, CronSchedule):
        problems.extend(_cron_problems(definition.schedule, len(scopes), file))
    signup = definition.signup
    if signup is not None and not signup.channel and not _has_step(definition, SIGNUP_ACTION):
        # Written but empty is ``channel: #raids``: the # began a YAML comment.
        empty = "channel" in signup.model_fields_set
        refuse(
            (
                "empty (a # after the colon starts a YAML comment: write '#name' in quotes, or leave the "
                "# out), so "
                if empty
                else ""
            )
            + "no sign-up message would ever be posted: give signup.channel (posted when the run is "
            f"booked) or add a {SIGNUP_ACTION} step",
            "signup.channel" if empty else "signup",
        )
    if isinstance(definition.schedule, OnceSchedule):
        at = to_naive_utc(definition.schedule.at)
        moment = now if now is not None else dt.datetime.now(dt.UTC).replace(tzinfo=None)
        if at <= moment:
            refuse(
                f"{definition.schedule.at.isoformat()} ({at:%a %d %b %Y %H:%M} UTC) is in the past: "
                "this event would never run (give it a date still to come)",
                "schedule.once",
            )
        elif signup is not None and not signup.open_until_the_end:
            closes = at - dt.timedelta(seconds=signup.closes_before_start())
            if closes <= moment:
                refuse(
                    f"sign-ups would close {closes:%a %d %b %Y %H:%M} UTC, which has already passed: "
                    "nobody could sign up (a shorter closes:, or closes: start or end)",
                    "signup.closes",
                )
    for index, reminder in enumerate(definition.reminders):
        problem = placeholders.problem(reminder.label) if reminder.label else None
        if problem:
            refuse(problem, f"reminders.{index}.label")
    return problems


def _has_step(definition: EventDefinition, action: str) -> bool:
    return any(step.action == action for phase in definition.phases for step in phase.steps)


def _cron_problems(schedule: CronSchedule, scopes: int, file: str | None) -> list[Problem]:
    cron = schedule.cron
    if len(cron.split()) != 5:
        message = (
            f"invalid cron expression {cron[:60]!r}: use five fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 20 * * FRI'"
        )
        return [Problem(message, file=file, field="schedule.cron")]
    gap = _shortest_gap_seconds(cron)
    if gap < limits.CRON_MIN_INTERVAL_SECONDS:
        message = (
            f"{cron!r} fires {gap // 60} minute(s) apart at times; an event may recur at most "
            f"every {limits.CRON_MIN_INTERVAL_SECONDS // 60} minutes"
        )
        return [Problem(message, file=file, field="schedule.cron")]
    per_day = schedule.occurrences_per_day() * scopes
    if per_day > limits.MAX_SCHEDULED_RUNS_PER_DAY:
        message = (
            f"{cron!r} with {scopes} scope(s) makes up to {per_day} runs a day; at most "
            f"{limits.MAX_SCHEDULED_RUNS_PER_DAY} (fire less often, or use fewer scopes)"
        )
        return [Problem(message, file=file, field="schedule.cron")]
    return []


def _phase_key(raw: Any, index: int) -> str:
    phases = raw.get("phases") if isinstance(raw, dict) else None
    if isinstance(phases, list) and index < len(phases) and isinstance(phases[index], dict):
        key = phases[index].get("key")
        if isinstance(key, str) and key:
            return key
    return f"#{index}"


def _locate(raw: Any, loc: tuple[Any, ...]) -> tuple[str | None, int | None, str | None]:
    """Turn an author's location (``words.worded``'s) into (phase key, step index, field)."""
    phase: str | None = None
    step: int | None = None
    rest = list(loc)
    if len(rest) >= 2 and rest[0] == "phases" and isinstance(rest[1], int):
        phase = _phase_key(raw, rest[1])
        rest = rest[2:]
        if len(rest) >= 2 and rest[0] == "steps" and isinstance(rest[1], int):
            step = rest[1]
            rest = rest[2:]
    field = _dotted(rest) or None
    return phase, step, field


def _dotted(parts: list[Any]) -> str:
    # A key that is empty (``"": 1``) is shown quoted, so the place it names is still visible.
    return ".".join(str(p) if p != "" else "''" for p in parts)


def _from_validation_error(exc: ValidationError, raw: Any, file: str | None) -> list[Problem]:
    problems = []
    for said in worded(exc, EventDefinition, raw):
        phase, step, field = _locate(raw, said.loc)
        problems.append(Problem(message=said.message, file=file, phase=phase, step=step, field=field))
    return problems


def validate(
    raw: Any, registry: ActionRegistry, *, file: str | None = None, now: dt.datetime | None = None
) -> EventDefinition:
    """Validate a definition (already parsed from YAML) completely, or raise ``DefinitionError``
    listing every problem with its place. ``now`` (naive UTC; the wall clock when not given)
    decides whether a ``once`` is still to come."""
    if not isinstance(raw, dict):
        raise DefinitionError([Problem("a definition must be a mapping of fields", file=file)])
    # Limits first (an upload may list tens of thousands): a list past its limit is cut to it,
    # so only what the limit allows is looked at, and more values than any event needs is
    # refused before any of them is.
    oversize = oversize_problems(raw, file)
    raw = within_limits(raw) if oversize else raw
    too_many = values_problem(raw, file)
    if too_many is not None:
        raise DefinitionError([*oversize, too_many])
    try:
        definition = EventDefinition.model_validate(raw)
    except ValidationError as exc:
        problems = oversize + [
            p for p in _from_validation_error(exc, raw, file) if not p.message.startswith(DUPLICATE_PHASES)
        ]
        problems.extend(_duplicate_phase_problems(raw, file))
        # Structural errors hide the params ones; report those too where the structure allows.
        problems.extend(_params_problems_raw(raw, registry, file))
        problems.extend(_reminder_problems_raw(raw, registry, file))
        # The raw params check can repeat the model's own word for a step whose params are not
        # a mapping at all: say it once.
        raise DefinitionError(list(dict.fromkeys(problems))) from None
    problems = oversize + publication_problems(definition, file, now)
    problems.extend(_signup_placeholder_problems(definition, file))
    problems.extend(_params_problems(definition, registry, file))
    problems.extend(_reminder_problems(definition, registry, file))
    problems.extend(condition_problems(definition, file))
    if problems:
        raise DefinitionError(problems)
    return definition


def _texts(value: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [t for key, item in value.items() for t in _texts(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [t for index, item in enumerate(value) for t in _texts(item, f"{where}.{index}")]
    return []


def _signup_placeholder_problems(definition: EventDefinition, file: str | None) -> list[Problem]:
    """The sign-up placeholders need a ``signup:`` (``runner.definitions.signup``)."""
    texts: list[tuple[str | None, int | None, str, str]] = []
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            texts += [(phase.key, index, f, t) for f, t in _texts(step.params, "params")]
    for index, reminder in enumerate(definition.reminders):
        texts += [(None, None, f"reminders.{index}{f}", t) for f, t in _texts(reminder.params, "")]
    return [
        Problem(message, file=file, phase=phase, step=step, field=field)
        for phase, step, field, message in signup_placeholder_problems(definition.signup, texts)
    ]


def _duplicate_phase_problems(raw: dict[str, Any], file: str | None) -> list[Problem]:
    """Name every phase that repeats an earlier phase's key, at its own place."""
    phases = raw.get("phases")
    if not isinstance(phases, list):
        return []
    seen: set[str] = set()
    problems = []
    for phase in phases:
        key = phase.get("key") if isinstance(phase, dict) else None
        if not isinstance(key, str):
            continue
        if key in seen:
            problems.append(
                Problem(
                    f"{DUPLICATE_PHASES}: {key!r} is used by an earlier phase",
                    file=file,
                    phase=key,
                    field="key",
                )
            )
        seen.add(key)
    return problems


def _check_step(
    action_id: Any,
    params: Any,
    registry: ActionRegistry,
    file: str | None,
    phase: str,
    index: int,
    *,
    beside: tuple[str, ...] = (),
) -> list[Problem]:
    """A step's action and params; ``beside``: the names a reminder has besides its params."""
    if not isinstance(action_id, str):
        return []
    action = registry.get(action_id)
    if action is None:
        known = ", ".join(registry.described())
        hint = did_you_mean(action_id, registry.ids())
        return [
            Problem(
                f"unknown action {action_id!r}{hint} (known: {known})",
                file=file,
                phase=phase,
                step=index,
                field="action",
            )
        ]
    return _params_words(action.params_model, params, file, phase, index, beside)


def _params_words(
    model: type[BaseModel],
    params: Any,
    file: str | None,
    phase: str,
    index: int,
    beside: tuple[str, ...],
) -> list[Problem]:
    value = params if params is not None else {}
    if isinstance(value, dict):
        # A key that is not text (a bare on read as true) is reported once, with the fix, by the
        # definition's own check; the action's model would add "keys should be strings" at 'params.1'.
        value = {key: item for key, item in value.items() if isinstance(key, str)}
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return [
            Problem(
                message=said.message,
                file=file,
                phase=phase,
                step=index,
                field=_dotted(["params", *said.loc]),
            )
            for said in worded(exc, model, value, extra_known=beside)
        ]
    return []


def _params_problems(
    definition: EventDefinition, registry: ActionRegistry, file: str | None
) -> list[Problem]:
    problems: list[Problem] = []
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            found = _check_step(step.action, step.params, registry, file, phase.key, index)
            problems.extend(found)
            if not found:
                problems.extend(_scope_problems(definition, registry, file, phase.key, index, step))
                problems.extend(_signup_step_problems(definition, registry, file, phase.key, index, step))
    return problems


def _signup_step_problems(
    definition: EventDefinition,
    registry: ActionRegistry,
    file: str | None,
    phase: str,
    index: int,
    step: StepDefinition,
) -> list[Problem]:
    """Params models may need the event's ``signup:`` (a ``discord.signup`` step, a cue's
    ``ping: attendees``): each says what it lacks, with the field it names."""
    action = registry.get(step.action)
    params = action.params_model.model_validate(step.params) if action else None
    check = getattr(params, "signup_problems", None)
    if check is None:
        return []
    return [
        Problem(message, file=file, phase=phase, step=index, field=field)
        for field, message in check(definition.signup)
    ]


def _scope_problems(
    definition: EventDefinition,
    registry: ActionRegistry,
    file: str | None,
    phase: str,
    index: int,
    step: StepDefinition,
) -> list[Problem]:
    """Params models may check their text again per scope (``{scope}`` is filled in at run time,
    and a long scope name can push a message past a platform limit)."""
    action = registry.get(step.action)
    params = action.params_model.model_validate(step.params) if action else None
    check = getattr(params, "problems_for_scope", None)
    if check is None:
        return []
    return [
        Problem(message, file=file, phase=phase, step=index, field=f"params.{field}")
        for scope in definition.run_scopes()
        for field, message in check(scope)
    ]


def _reminder_problems(
    definition: EventDefinition, registry: ActionRegistry, file: str | None
) -> list[Problem]:
    """Each reminder is an announcement or a DM to the attendees: its fields are checked by that
    action's own params model, scope by scope, and located at ``reminders.<index>.<field>``."""
    problems: list[Problem] = []
    for index, reminder in enumerate(definition.reminders):
        action = reminder_action(reminder.to)
        found = _check_step(action, reminder.params, registry, file, "", index, beside=REMINDER_OWN)
        if not found:
            step = StepDefinition(action=action, params=reminder.params)
            found = _scope_problems(definition, registry, file, "", index, step)
            found += _signup_step_problems(definition, registry, file, "", index, step)
        problems.extend(_at_reminder(found, index, file))
    return problems


def _at_reminder(found: list[Problem], index: int, file: str | None) -> list[Problem]:
    """A reminder is written flat, so its announcement's ``params.channel`` is its ``channel``."""
    problems = []
    for problem in found:
        inner = (problem.field or "").removeprefix("params.").removeprefix("params")
        field = f"reminders.{index}.{inner}" if inner else f"reminders.{index}"
        problems.append(Problem(problem.message, file=file, field=field))
    return problems


def _reminder_problems_raw(raw: dict[str, Any], registry: ActionRegistry, file: str | None) -> list[Problem]:
    """The reminders' announcement fields when the definition's structure failed elsewhere, so
    those come in the same pass. Only a mapping written flat (as the model reads it) is
    checked; anything else is the model's error to report."""
    reminders = raw.get("reminders")
    if not isinstance(reminders, list):
        return []
    problems: list[Problem] = []
    for index, reminder in enumerate(reminders):
        if not isinstance(reminder, dict) or "params" in reminder:
            continue
        params = {k: v for k, v in reminder.items() if k not in REMINDER_OWN}
        action = reminder_action(reminder.get("to"))
        found = _check_step(action, params, registry, file, "", index, beside=REMINDER_OWN)
        problems.extend(_at_reminder(found, index, file))
    return problems


def _params_problems_raw(raw: dict[str, Any], registry: ActionRegistry, file: str | None) -> list[Problem]:
    problems: list[Problem] = []
    phases = raw.get("phases")
    if not isinstance(phases, list):
        return problems
    for p_index, phase in enumerate(phases):
        if not isinstance(phase, dict) or not isinstance(phase.get("steps"), list):
            continue
        for s_index, step in enumerate(phase["steps"]):
            if isinstance(step, dict):
                problems.extend(
                    _check_step(
                        step.get("action"),
                        step.get("params"),
                        registry,
                        file,
                        _phase_key(raw, p_index),
                        s_index,
                    )
                )
    return problems
