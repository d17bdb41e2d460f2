"""A definition's lists counted against their limits on the data as read, before the model looks
at a single entry (issue 26 item 3).

The model checks every entry of a list (each option's name, each scope for repeats, each step's
params against its action), so an upload of tens of thousands of entries, which fits in 256 KB,
took seconds to refuse for a limit it broke on its first look. Counting first costs one
``len`` per list; a definition past a limit is refused with only those problems, each naming
the field and the limit, and nothing else in it is looked at.
"""

from __future__ import annotations

from typing import Any

from runner import limits
from runner.definitions.model import MAX_REMINDERS
from runner.definitions.signup import MAX_OPTIONS, MAX_SIGNUP_ROLES
from runner.errors import Problem


def too_many_scopes(count: int) -> str:
    return (
        f"{count} scopes; an event may have at most {limits.MAX_SCOPES} "
        "(each is a run of its own, announced at Discord's pace)"
    )


def too_many_phases(count: int) -> str:
    return f"{count} phases; an event may have at most {limits.MAX_PHASES}"


def too_many_steps(count: int) -> str:
    return f"{count} steps in all; an event may have at most {limits.MAX_STEPS}"


def too_many_options(count: int) -> str:
    return f"{count} options; a sign-up may have at most {MAX_OPTIONS}"


def too_many_values() -> str:
    return (
        f"more than {limits.MAX_VALUES} values (entries of lists and mappings) in all; an event "
        "needs far fewer (a YAML alias counts each time it is used)"
    )


def _too_long(count: int, limit: int) -> str:
    # The model's own words for a list past its ``max_length`` (``words.worded``).
    return f"lists {count} items; at most {limit} are allowed"


def oversize_problems(raw: dict[str, Any], file: str | None) -> list[Problem]:
    """Every list in ``raw`` longer than its limit, by its length alone (no entry is read)."""
    found: list[tuple[str, str]] = []
    scopes, phases, reminders = raw.get("scopes"), raw.get("phases"), raw.get("reminders")
    if isinstance(scopes, list) and len(scopes) > limits.MAX_SCOPES:
        found.append(("scopes", too_many_scopes(len(scopes))))
    if isinstance(phases, list):
        if len(phases) > limits.MAX_PHASES:
            found.append(("phases", too_many_phases(len(phases))))
        steps = sum(len(_steps(p)) for p in phases)
        if steps > limits.MAX_STEPS:
            found.append(("phases", too_many_steps(steps)))
    if isinstance(reminders, list) and len(reminders) > MAX_REMINDERS:
        found.append(("reminders", _too_long(len(reminders), MAX_REMINDERS)))
    signup = raw.get("signup")
    if isinstance(signup, dict):
        options, roles = signup.get("options"), signup.get("roles")
        if isinstance(options, list | dict) and len(options) > MAX_OPTIONS:
            found.append(("signup.options", too_many_options(len(options))))
        if isinstance(roles, list) and len(roles) > MAX_SIGNUP_ROLES:
            found.append(("signup.roles", _too_long(len(roles), MAX_SIGNUP_ROLES)))
    return [Problem(message, file=file, field=field) for field, message in found]


def _steps(phase: Any) -> list[Any]:
    steps = phase.get("steps") if isinstance(phase, dict) else None
    return steps if isinstance(steps, list) else []


def within_limits(raw: Any) -> Any:
    """``raw`` with every list cut to its limit (a copy; ``raw`` itself is left as read): the
    entries within the limits are still checked, and reported in the same pass as the limit,
    and those past it, which the author must remove anyway, are never looked at."""
    if not isinstance(raw, dict):
        return raw
    cut = dict(raw)
    if isinstance(raw.get("scopes"), list):
        cut["scopes"] = raw["scopes"][: limits.MAX_SCOPES]
    if isinstance(raw.get("reminders"), list):
        cut["reminders"] = raw["reminders"][:MAX_REMINDERS]
    if isinstance(raw.get("phases"), list):
        kept, left = [], limits.MAX_STEPS
        for phase in raw["phases"][: limits.MAX_PHASES]:
            if left <= 0:
                break
            steps = _steps(phase)
            if steps:
                phase = {**phase, "steps": steps[:left]}
                left -= len(phase["steps"])
            kept.append(phase)
        cut["phases"] = kept
    signup = raw.get("signup")
    if isinstance(signup, dict):
        signup = cut["signup"] = dict(signup)
        options, roles = signup.get("options"), signup.get("roles")
        if isinstance(options, list):
            signup["options"] = options[:MAX_OPTIONS]
        elif isinstance(options, dict):
            signup["options"] = dict(list(options.items())[:MAX_OPTIONS])
        if isinstance(roles, list):
            signup["roles"] = roles[:MAX_SIGNUP_ROLES]
    return cut


def values_problem(raw: dict[str, Any], file: str | None) -> Problem | None:
    """A problem if ``raw`` holds more than ``MAX_VALUES`` values, at the field (or the step's
    field) whose values passed it. A list or mapping is charged its length before it is opened,
    so the walk costs at most ``MAX_VALUES`` steps however the aliases multiply."""
    budget = limits.MAX_VALUES - len(raw)
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, (key,)) for key, value in raw.items()]
    where: tuple[Any, ...] = ()
    while stack and budget >= 0:
        item, where = stack.pop()
        if isinstance(item, dict | list):
            budget -= len(item)
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            # A place is named down to a step's field (phases, 0, steps, 3, params), no deeper.
            stack.extend((value, (*where, key)[:5]) for key, value in pairs)
    if budget >= 0:
        return None
    message = (
        f"more than {limits.MAX_VALUES} values (entries of lists and mappings) in all; an event "
        "needs far fewer (a YAML alias counts each time it is used)"
    )
    if len(where) >= 4 and where[0] == "phases" and where[2] == "steps":
        phase = raw["phases"][where[1]]
        key = phase.get("key") if isinstance(phase, dict) else None
        field = str(where[4]) if len(where) > 4 else None
        return Problem(
            message,
            file=file,
            phase=key if isinstance(key, str) else f"#{where[1]}",
            step=where[3],
            field=field,
        )
    return Problem(message, file=file, field=str(where[0]) if where else None)
