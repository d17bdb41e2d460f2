"""Generated event definitions and the checks every generated definition must pass, shared by
the bad-input property tests (``tests/reliability/test_bad_input.py``), the definition fuzz
(``test_definition_fuzz.py``) and the config fuzz (``test_bad_config.py``).

``valid_definitions()`` builds definitions from the real actions' params; ``mutated_definitions()``
breaks one in one known place and says which (``Place``); ``check_problems`` and
``names_the_place`` judge a refusal, ``check_runnable`` an acceptance (its actions take every
step, its concurrency keys fit their column, it survives the JSON round trip)."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import string
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from actions import validation_registry
from runner import definitions as defs
from runner.dispatch import perform
from runner.errors import DefinitionError, Problem
from runner.registry import Envelope
from runner.schema import runs

REGISTRY = validation_registry()
FILE = "events/bad.yaml"
CONCURRENCY_KEY_MAX = runs.c.concurrency_key.type.length  # type: ignore[attr-defined]

YAML_ALPHABET = string.ascii_letters + string.digits + " :-[]{}#&*!|>'\"%@`,?\n\t.\\"


# ── Strategies ──────────────────────────────────────────────────────────────

KEYS = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,30}", fullmatch=True)
TEXT = st.text(min_size=1, max_size=60)


def message_text(min_size: int = 0, max_size: int = 300) -> st.SearchStrategy[str]:
    """Text players read, with its braces escaped (``{{``/``}}``) so it is valid however odd it is,
    and now and then a ``{scope}`` placeholder: the placeholder rule is exercised, never tripped."""
    escaped = st.text(min_size=min_size, max_size=max_size // 2).map(
        lambda t: t.replace("{", "{{").replace("}", "}}")
    )
    return st.one_of(escaped, escaped, escaped.map(lambda t: t + " {scope}"))


# A label has no room to escape into (200 characters), so braces are left out of it.
LABELS = st.text(max_size=200).filter(lambda t: "{" not in t and "}" not in t)
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(min_size=190, max_size=260),
    st.sampled_from(["", " ", "\n", "{scope}", "{", "}", "\x00", "\u202e", "🎉" * 70, "x" * 5000, "NULL"]),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, -0.0, 10**9, 2**63]),
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | NASTY_TEXT,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
# Valid durations only (NaN is refused at validation; ``test_known_bad_input`` pins that).
DURATIONS = st.one_of(
    st.integers(min_value=1, max_value=7 * 24 * 3600),
    st.floats(min_value=0.001, max_value=7 * 24 * 3600),
    st.sampled_from(["90s", "5m", "1h30m", "2d", "0.5", "1e3", " 10 ", "1h"]),
)
CHANNELS = st.sampled_from(["#general", "events", "announcements-2", "123456789012345678"])
# Within runner.limits for up to three scopes (at most 500 runs a day, 5 minutes apart).
CRONS = st.sampled_from(["*/10 * * * *", "0 20 * * 5", "30 18 1 * *", "0 0 * * MON-FRI"])
ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"])
# Still to come whenever the suite runs: validation refuses a ``once`` that is already over.
ONCE = st.datetimes(
    min_value=dt.datetime(2090, 1, 1), max_value=dt.datetime(2199, 1, 1), timezones=st.timezones()
).map(lambda moment: moment.isoformat())
# Templates whose filled-in key fits the column for scopes up to SCOPE_MAX; conversions, format
# specs and double ``{scope}`` are pinned in ``test_known_bad_input`` instead.
TEMPLATES = st.sampled_from(
    [None, "{scope}", "event-{scope}", "lock", "{{literal}}-{scope}", "{scope}{scope}"]
)
SCOPE_MAX = 150


@st.composite
def steps_(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["wait", "announce", "cue"]))
    if kind == "wait":
        body: dict[str, Any] = {"action": "core.wait", "params": {"duration": draw(DURATIONS)}}
    elif kind == "announce":
        params: dict[str, Any] = {"channel": draw(CHANNELS)}
        if draw(st.booleans()):
            params["content"] = draw(message_text(min_size=1))
        else:
            params["embed"] = {"title": draw(message_text(1, 120)), "description": draw(message_text(0, 200))}
        if draw(st.booleans()):
            params["ping_role"] = draw(st.sampled_from(["raiders", "everyone-events"]))
        body = {"action": "discord.announce", "params": params}
    else:
        body = {"action": "gm.cue", "params": {"instructions": draw(message_text(min_size=1))}}
    if draw(st.booleans()):
        body["label"] = draw(LABELS)
    if draw(st.booleans()):
        body["on_failure"] = draw(st.sampled_from(["skip", "pause", "abort_run"]))
    return body


@st.composite
def valid_definitions(draw: st.DrawFn) -> dict[str, Any]:
    phase_keys = draw(st.lists(KEYS, min_size=1, max_size=3, unique=True))
    raw: dict[str, Any] = {
        "key": draw(KEYS),
        "title": draw(st.text(min_size=1, max_size=200)),
        "phases": [
            {"key": key, "label": draw(TEXT), "steps": draw(st.lists(steps_(), min_size=1, max_size=3))}
            for key in phase_keys
        ],
    }
    if draw(st.booleans()):
        raw["description"] = draw(st.text(max_size=300))
    schedule = draw(st.sampled_from(["none", "manual", "once", "cron"]))
    if schedule == "manual":
        raw["schedule"] = "manual"
    elif schedule == "once":
        raw["schedule"] = {"once": draw(ONCE)}
    elif schedule == "cron":
        raw["schedule"] = {"cron": draw(CRONS), "timezone": draw(ZONES)}
    if draw(st.booleans()):
        raw["grace_seconds"] = draw(st.integers(min_value=0, max_value=7 * 24 * 3600))
    if draw(st.booleans()):
        raw["scopes"] = draw(st.lists(st.text(min_size=1, max_size=SCOPE_MAX), max_size=3, unique=True))
    template = draw(TEMPLATES)
    if template is not None:
        raw["concurrency_key"] = template
    return raw


@dataclass(frozen=True)
class Place:
    """Where a mutation was made: a top-level field, or inside phase ``phase`` (step ``step``)."""

    field: str | None = None
    phase: int | None = None
    step: int | None = None
    in_params: bool = False


SPECIAL: dict[str, list[Any]] = {
    "key": ["Bad Key", "", "a" * 65, "ÜBER", 7],
    "title": ["", "t" * 201, None, ["list"]],
    "schedule": [
        {"cron": "61 * * * *", "timezone": "UTC"},
        {"cron": "* * * * *", "timezone": "Mars/Olympus"},
        {"cron": "* * * * *", "timezone": "Europe/"},
        {"cron": "", "timezone": "UTC"},
        {"once": "2026-12-05T19:00:00"},
        {"once": "yesterday"},
        {"kind": "weekly"},
        "sometimes",
    ],
    "grace_seconds": [-1, 10**9, "15m", 1.5, None, True],
    "scopes": [["dup", "dup"], [""], ["s" * 191], "not-a-list", [1, 2]],
    "concurrency_key": [
        "",
        "{other}",
        "{0}",
        "{scope.upper}",
        "{",
        "k" * 151,
        "{scope!x}",
        "{scope:d}",
        "{scope:%}",
    ],
    "phases": [[], {}, "main", [None]],
    "phase.key": ["", "Bad Key", "a" * 65, 3, None],
    "phase.label": ["", "l" * 201, None],
    "phase.steps": [[], None, "steps", [None]],
    "step.action": ["discord.anounce", "", "core", None, 5, "x" * 200],
    "step.on_failure": ["retry", "", None, 0],
    "step.label": ["l" * 201, 3],
    "step.params": [None, "params", [1], {"nope": 1}],
}


@st.composite
def mutated_definitions(draw: st.DrawFn) -> tuple[dict[str, Any], Place]:
    raw = copy.deepcopy(draw(valid_definitions()))
    level = draw(st.sampled_from(["top", "phase", "step", "params"]))
    value = draw(st.one_of(JSON, st.just("<delete>")))
    if level == "top":
        field = draw(st.sampled_from([*SPECIAL.keys() - {k for k in SPECIAL if "." in k}, "colour"]))
        if field in SPECIAL and draw(st.booleans()):
            value = draw(st.sampled_from(SPECIAL[field]))
        _set(raw, field, value)
        return raw, Place(field=field)
    p = draw(st.integers(min_value=0, max_value=len(raw["phases"]) - 1))
    target_phase = raw["phases"][p]
    if level == "phase":
        field = draw(st.sampled_from(["key", "label", "steps", "extra", "<whole>"]))
        if field == "<whole>":
            raw["phases"][p] = value if value != "<delete>" else None
            return raw, Place(phase=p)
        if f"phase.{field}" in SPECIAL and draw(st.booleans()):
            value = draw(st.sampled_from(SPECIAL[f"phase.{field}"]))
        _set(target_phase, field, value)
        return raw, Place(phase=p)
    s = draw(st.integers(min_value=0, max_value=len(target_phase["steps"]) - 1))
    target_step = target_phase["steps"][s]
    if level == "step":
        field = draw(st.sampled_from(["action", "label", "params", "on_failure", "timeout", "<whole>"]))
        if field == "<whole>":
            target_phase["steps"][s] = value if value != "<delete>" else None
            return raw, Place(phase=p, step=s)
        if f"step.{field}" in SPECIAL and draw(st.booleans()):
            value = draw(st.sampled_from(SPECIAL[f"step.{field}"]))
        _set(target_step, field, value)
        return raw, Place(phase=p, step=s)
    params = target_step["params"]
    field = draw(st.sampled_from([*params.keys(), "unknown_param"]))
    _set(params, field, value)
    return raw, Place(phase=p, step=s, in_params=True)


def _set(mapping: dict[str, Any], field: str, value: Any) -> None:
    if value == "<delete>":
        mapping.pop(field, None)
    else:
        mapping[field] = value


def phase_label(raw: Any, index: int) -> str:
    """How a problem names phase ``index``: by its key when it has a usable one, else ``#index``."""
    phase_ = raw["phases"][index] if isinstance(raw.get("phases"), list) else None
    key = phase_.get("key") if isinstance(phase_, dict) else None
    return key if isinstance(key, str) and key else f"#{index}"


# ── Checks ──────────────────────────────────────────────────────────────────


def check_problems(error: DefinitionError, file: str | None) -> None:
    assert error.problems, "a DefinitionError with no problem in it"
    for problem in error.problems:
        assert isinstance(problem, Problem)
        assert isinstance(problem.message, str) and problem.message.strip(), (
            f"a problem with no message: {problem!r}"
        )
        assert problem.file == file, f"{problem!r} does not name the file"
        assert problem.step is None or problem.phase is not None, (
            f"{problem!r} names a step but not its phase"
        )
        assert str(problem).strip()


def names_the_place(error: DefinitionError, raw: dict[str, Any], place: Place) -> bool:
    problems = error.problems
    if place.field is not None:
        return any(
            p.phase is None
            and p.field is not None
            and (p.field == place.field or p.field.startswith(place.field + "."))
            for p in problems
        ) or (place.field == "phases" and any(p.phase is not None for p in problems))
    assert place.phase is not None
    label = phase_label(raw, place.phase)
    located = [p for p in problems if p.phase == label]
    if place.step is None:
        # Two phases with one key is a fault of the pair, named by the key in the message.
        return bool(located) or any("phase keys must be unique" in p.message for p in problems)
    step_problems = [p for p in located if p.step == place.step]
    if place.in_params:
        return any((p.field or "").startswith("params") for p in step_problems)
    return bool(step_problems)


async def verify_dispatch(definition: defs.EventDefinition) -> list[str]:
    """Every step as its action would take it, in verify mode (nothing is sent)."""
    refused = []
    for each_phase in definition.phases:
        for index, each_step in enumerate(each_phase.steps):
            for scope in definition.run_scopes():
                envelope = Envelope(
                    actor=None,
                    idempotency_key="k" * 40,
                    params=dict(each_step.params),
                    run_id=1,
                    scope=scope,
                    step_id=1,
                    verify=True,
                )
                outcome = await perform(REGISTRY, envelope, each_step.action)
                if outcome.outcome not in ("done", "parked"):
                    refused.append(f"{each_phase.key} step {index}: {outcome.outcome}: {outcome.error}")
    return refused


def check_runnable(definition: defs.EventDefinition) -> None:
    refused = asyncio.run(verify_dispatch(definition))
    assert not refused, f"validated, yet its actions refuse it: {refused}"
    for scope in definition.run_scopes():
        key = definition.concurrency_key_for(scope)
        assert key is None or len(key) <= CONCURRENCY_KEY_MAX, f"concurrency key {key!r} overflows its column"
    json.dumps(definition.model_dump(mode="json"), allow_nan=False)
    assert defs.from_spec(json.loads(definition.canonical_json())) == definition
