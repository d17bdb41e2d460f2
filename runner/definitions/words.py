"""What an author reads when a definition is refused: pydantic's errors in words, at the place
the author wrote.

Pydantic speaks of its own machinery ("Input should be a valid string", "Extra inputs are not
permitted", union tags, the model's internal field names). An author sees none of that: each
error is worded here ("must be text, not a number", "unknown field 'color'; did you mean
'colour'?") and located by the names in the YAML, not the model's (``schedule.once``, never the
model's ``schedule.at``; a reminder's ``channel``, never ``params.channel``). The walk that maps
the location follows the model's own types, so it works for any params model an action declares.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from runner.definitions.model import OnceSchedule, ReminderDefinition
from runner.suggestions import did_you_mean

# Where the model's name for a field is not the one authors write: the schedule shorthand
# ``{once: ...}`` is stored as ``at``.
_AUTHOR_NAMES: dict[tuple[type[BaseModel], str], str] = {(OnceSchedule, "at"): "once"}
# Fields an author never writes in the shorthand, so never offered as a correction.
_UNOFFERED = {"kind"}

SCHEDULE_FORMS = (
    "A schedule is one of: schedule: manual (staff start it); "
    'schedule: {cron: "0 20 * * FRI", timezone: Europe/Berlin} (repeats, read in that time '
    'zone); schedule: {once: "2026-12-24T20:00:00+01:00"} (one date and time, with its UTC offset)'
)
_SCHEDULE_SHAPE = {
    "union_tag_not_found",
    "union_tag_invalid",
    "model_attributes_type",
    "model_type",
    "dict_type",
}
DATE_TIME_EXAMPLE = "2026-12-24T20:00:00+01:00"


@dataclass(frozen=True)
class Worded:
    """One error as the author reads it: where (the YAML's names) and what."""

    loc: tuple[Any, ...]
    message: str


@dataclass
class _Walked:
    loc: tuple[Any, ...]
    # The field names allowed beside the error's last part (for "did you mean").
    known: list[str]
    # When the error is inside one member of a union: where the union is, which member, all
    # members, and the value written there.
    union: tuple[tuple[Any, ...], Any, tuple[Any, ...], Any] | None = None


def worded(
    exc: ValidationError,
    model: type[BaseModel],
    raw: Any,
    *,
    extra_known: Iterable[str] = (),
) -> list[Worded]:
    """Every error of ``exc`` (raised validating ``raw`` as ``model``) in words, at the author's
    location. ``extra_known``: further names allowed at the top (a reminder's own ``before`` and
    ``label`` beside its announcement's params)."""
    walked: list[tuple[ErrorDetails, _Walked]] = []
    for err in exc.errors():
        where = _walk(model, raw, tuple(err["loc"]))
        if len(where.loc) <= 1:
            where.known += list(extra_known)
        walked.append((err, where))
    return _one_per_union(walked)


def _one_per_union(walked: list[tuple[ErrorDetails, _Walked]]) -> list[Worded]:
    """A value that fits no member of a union (``discord_event: 5``) gets one message naming the
    forms, not one per member; a mapping is held to the model member's rules alone."""
    out: list[Worded] = []
    said: set[tuple[Any, ...]] = set()
    for err, where in walked:
        if where.union is None:
            out.append(Worded(where.loc, _message(err, where.known)))
            continue
        at, member, members, value = where.union
        if isinstance(value, dict):
            if isinstance(member, type) and issubclass(member, BaseModel):
                out.append(Worded(where.loc, _message(err, where.known)))
            continue
        if at not in said:
            said.add(at)
            out.append(Worded(at, f"must be {_forms(members)}, not {_kind_of(value)}"))
    return out


def _forms(members: tuple[Any, ...]) -> str:
    """``true, false, or a mapping (with location, description)``: a union's members in words,
    plain values first."""
    words: list[str] = []
    for member in sorted(members, key=_is_model):
        if member is bool:
            words += ["true", "false"]
        elif _is_model(member):
            words.append(f"a mapping (with {', '.join(_author_fields(member))})")
        else:
            words.append(_TYPE_WORDS.get(member, getattr(member, "__name__", str(member))))
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])}, or {words[-1]}"


_TYPE_WORDS: dict[Any, str] = {str: "text", int: "a whole number", float: "a number"}


# ── the walk: the model's location to the author's ──


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> tuple[Any, ...]:
    """A union's members without ``None``, or ``()`` when it is not a union of several."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = tuple(_unwrap(m) for m in get_args(annotation) if m is not type(None))
        return members if len(members) > 1 else ()
    return ()


def _optional_inner(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        members = [m for m in get_args(annotation) if m is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation


def _tag_member(members: tuple[Any, ...], part: Any) -> Any:
    """The member a union's location tag names: a model's class name or its ``kind``, or a
    plain type's name (``bool``)."""
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            kind = member.model_fields.get("kind")
            if part == member.__name__ or (kind is not None and kind.default == part):
                return member
        elif getattr(member, "__name__", None) == part:
            return member
    return None


def _author_fields(model: type[BaseModel]) -> list[str]:
    return [
        _AUTHOR_NAMES.get((model, name), name)
        for name in model.model_fields
        if name not in _UNOFFERED and not (model is ReminderDefinition and name == "params")
    ]


def _walk(model: type[BaseModel], raw: Any, loc: tuple[Any, ...]) -> _Walked:
    annotation: Any = model
    value = raw
    author: list[Any] = []
    known: list[str] = _author_fields(model)
    union = None
    for part in loc:
        annotation = _optional_inner(_unwrap(annotation))
        members = _members(annotation)
        if members:
            member = _tag_member(members, part)
            if member is not None:
                union = (tuple(author), member, members, value)
                annotation = member
                known = _author_fields(member) if _is_model(member) else []
                continue
        origin = get_origin(annotation)
        if isinstance(part, int) and origin is list:
            annotation = get_args(annotation)[0] if get_args(annotation) else None
            value = value[part] if isinstance(value, list) and 0 <= part < len(value) else None
            author.append(part)
            known = []
        elif _is_model(annotation):
            field = annotation.model_fields.get(part) if isinstance(part, str) else None
            known = _author_fields(annotation)
            if annotation is ReminderDefinition and part == "params" and not _has(value, "params"):
                # Written flat: the announcement's fields sit beside ``before``.
                annotation = field.annotation if field else None
                continue
            # The explicit form (``kind: once``, ``at: ...``) writes the model's own name.
            name = part if _has(value, part) else _AUTHOR_NAMES.get((annotation, part), part)
            value = value.get(name) if isinstance(value, dict) else None
            annotation = field.annotation if field else None
            author.append(name)
        else:
            value = value.get(part) if isinstance(value, dict) and isinstance(part, str) else None
            annotation = (
                get_args(annotation)[1] if origin is dict and len(get_args(annotation)) == 2 else None
            )
            author.append(part)
            known = []
    return _Walked(tuple(author), known, union)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _has(value: Any, key: str) -> bool:
    return isinstance(value, dict) and key in value


# ── the words ──


def _kind_of(value: Any) -> str:
    if value is None:
        # ``channel: #announcements`` reads as empty: the # began a comment.
        return (
            "empty (a # after the colon starts a YAML comment: write '#name' in quotes, or leave the # out)"
        )
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, int | float):
        return f"a number ({value!r:.40})" if len(repr(value)) <= 40 else "a number"
    if isinstance(value, str):
        return f"the text {_shown(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _shown(value: str, most: int = 40) -> str:
    return repr(value if len(value) <= most else value[:most] + "…")


def _subject(value: Any) -> str:
    """A value as the subject of a sentence: text as written, anything else by its kind."""
    return _shown(value) if isinstance(value, str) else _kind_of(value)


def _expected_choices(ctx: dict[str, Any]) -> list[str]:
    return re.findall(r"'([^']*)'", str(ctx.get("expected", "")))


def _message(err: ErrorDetails, known: list[str]) -> str:
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    value = err.get("input")
    loc = tuple(err["loc"])
    if kind in ("value_error", "assertion_error"):
        return _strip_prefix(err["msg"])
    if kind == "missing":
        return "missing: this field is required"
    if kind == "extra_forbidden":
        name = str(loc[-1]) if loc else ""
        if loc[:1] == ("schedule",) and name in ("cron", "timezone") and "once" in known:
            return (
                f"a schedule is cron or once, not both: {name} is for a repeating schedule, "
                "and a once time carries its own UTC offset"
            )
        hint = did_you_mean(name, known)
        if not hint and known:
            hint = f" (the fields here are {', '.join(known)})"
        return f"unknown field {name!r}{hint}"
    if loc == ("schedule",) and kind in _SCHEDULE_SHAPE:
        return schedule_form_problem(value)
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return f"must be {simple}, not {_kind_of(value)}"
    # A field typed with an enum (``on_failure``) is refused as a literal is, with the same ctx.
    if kind in ("literal_error", "enum"):
        choices = _expected_choices(ctx)
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        return f"{_subject(value)} is not one of {', '.join(choices)}{hint}"
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {least} characters"
    if kind == "string_too_long":
        length = len(value) if isinstance(value, str) else None
        it_is = f"it is {length} characters; " if length is not None else ""
        return f"too long: {it_is}at most {ctx.get('max_length')} fit"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty (list at least one)" if least == 1 else f"must list at least {least}"
    if kind == "too_long":
        return f"lists {ctx.get('actual_length')} items; at most {ctx.get('max_length')} are allowed"
    bound = _BOUNDS.get(kind)
    if bound is not None:
        limit = next(iter(ctx.values()), "")
        return f"must be {bound} {limit}, not {_kind_of(value)}"
    if kind.startswith(("datetime", "date", "time")):
        return f"{_subject(value)} is not a date and time: write it like {DATE_TIME_EXAMPLE}"
    if kind == "string_pattern_mismatch":
        # Every pattern in the definition and params models is checked by a validator that says
        # what is allowed in words (a test holds every model to that); this is the backstop.
        return f"{_subject(value)} is not in the form this field takes"
    return _plain(err["msg"])


_SIMPLE = {
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping (name: value lines)",
    "model_type": "a mapping (name: value lines)",
    "model_attributes_type": "a mapping (name: value lines)",
}
_BOUNDS = {
    "greater_than_equal": "at least",
    "greater_than": "more than",
    "less_than_equal": "at most",
    "less_than": "less than",
}


def _strip_prefix(message: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def _plain(message: str) -> str:
    """The backstop for an error kind not worded above: pydantic's sentence without its
    "Input should be" voice."""
    message = _strip_prefix(message)
    message = re.sub(r"^Input should be\b", "must be", message)
    message = re.sub(r"^Input\b", "the value", message)
    return message[:1].lower() + message[1:]


def schedule_form_problem(value: Any) -> str:
    """A schedule that is none of the forms: what was written, and the forms there are."""
    if isinstance(value, dict):
        keys = [str(k) for k in value]
        if "kind" in value:
            kind = _subject(value["kind"])
            return f"kind {kind} is not a kind of schedule (manual, once or cron). {SCHEDULE_FORMS}"
        if not keys:
            return f"an empty mapping is not a schedule. {SCHEDULE_FORMS}"
        hints = "".join(did_you_mean(k, ("cron", "once")) for k in keys[:3])
        written = ", ".join(repr(k) for k in keys[:5])
        return f"a schedule mapping needs cron or once (this one has {written}{hints}). {SCHEDULE_FORMS}"
    hint = did_you_mean(value, ("manual",)) if isinstance(value, str) else ""
    return f"{_subject(value)} is not a schedule{hint or '.'} {SCHEDULE_FORMS}"
