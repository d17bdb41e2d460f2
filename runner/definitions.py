"""Event definitions: the pydantic models staff author in YAML, and their validation.

Validation is total and located: every problem is reported at once, each naming the file, the
phase key, the step index and the field, so an author can fix a definition in one pass. Params
are checked against the params model the named action declares, so a definition that publishes
is one every step of which its action will accept.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import math
import re
import string
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal

from cronsim import CronSim, CronSimError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runner import limits, placeholders, yaml_text
from runner.errors import DefinitionError, Problem
from runner.registry import ActionRegistry

KEY = r"^[a-z0-9][a-z0-9_-]{0,63}$"
DEFAULT_GRACE_SECONDS = 900
MAX_GRACE_SECONDS = 7 * 24 * 60 * 60
DUPLICATE_PHASES = "phase keys must be unique"
# event_runs.concurrency_key is VARCHAR(190); a rehearsal run's key carries this prefix so it never
# holds (or waits on) the key of the live event it imitates.
CONCURRENCY_KEY_MAX = 190
REHEARSAL_KEY_PREFIX = "rehearsal:"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ManualSchedule(_Strict):
    kind: Literal["manual"] = "manual"


class OnceSchedule(_Strict):
    kind: Literal["once"] = "once"
    at: dt.datetime

    @field_validator("at")
    @classmethod
    def _aware(cls, value: dt.datetime) -> dt.datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("needs a time zone offset, e.g. 2026-12-05T19:00:00+01:00")
        try:
            value.astimezone(dt.UTC)
        except OverflowError:
            raise ValueError(
                f"{value.isoformat()} is outside the range of dates that can be stored"
            ) from None
        return value


class CronSchedule(_Strict):
    kind: Literal["cron"] = "cron"
    cron: str
    timezone: str

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r} (use an IANA name like Europe/Berlin)") from exc
        return value

    @field_validator("cron")
    @classmethod
    def _expression(cls, value: str) -> str:
        try:
            CronSim(value, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        except (CronSimError, ValueError, KeyError, IndexError, OverflowError) as exc:
            raise ValueError(f"invalid cron expression {value[:60]!r}: {exc}") from None
        return value

    def occurrences_per_day(self) -> int:
        """At most how many times it fires in one day (the day fields only choose which days)."""
        return len(_times_of_day(self.cron))


def _times_of_day(expression: str) -> list[int]:
    parsed = CronSim(expression, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    return sorted(h * 3600 + m * 60 + s for h in parsed.hours for m in parsed.minutes for s in parsed.seconds)


def _shortest_gap_seconds(expression: str) -> int:
    """The shortest time between two firings, counting the wrap from one day into the next."""
    times = _times_of_day(expression)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    gaps.append(times[0] + 86400 - times[-1])
    return min(gaps)


Schedule = Annotated[ManualSchedule | OnceSchedule | CronSchedule, Field(discriminator="kind")]


# Params are stored as JSON, so only JSON's values may be in them: a YAML-only value
# (``!!binary``, a timestamp) that an action's model coerces would be stored as something other
# than what was validated. The walk has a budget because YAML aliases can make a few lines of
# text into a structure of billions of nodes ("billion laughs"), all of it shared references.
MAX_PARAM_NODES = 10_000
_PLAIN = (str, bool, int, float, type(None))
_KINDS = {"bytes": "binary data (!!binary)", "datetime": "a date and time", "date": "a date", "set": "a set"}


def _not_plain(params: dict[str, Any]) -> str | None:
    budget = MAX_PARAM_NODES
    stack: list[tuple[Any, str]] = [(params, "")]
    while stack:
        value, where = stack.pop()
        budget -= 1
        if budget < 0:
            return f"params hold more than {MAX_PARAM_NODES} values (YAML aliases repeated?)"
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"{where or 'params'}: the key {key!r} is not text"
                stack.append((item, f"{where}.{key}" if where else key))
        elif isinstance(value, list):
            stack.extend((item, f"{where}.{index}") for index, item in enumerate(value))
        elif not isinstance(value, _PLAIN):
            kind = _KINDS.get(type(value).__name__, f"a YAML {type(value).__name__}")
            return (
                f"{where}: {kind} is not a plain value (text, a number, true/false, a list or a "
                "mapping); quote it"
            )
    return None


class StepDefinition(_Strict):
    action: str
    label: str | None = Field(default=None, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    on_failure: Literal["skip", "pause", "abort_run"] = "pause"

    @field_validator("params", mode="before")
    @classmethod
    def _plain_values(cls, value: Any) -> Any:
        if isinstance(value, dict):
            problem = _not_plain(value)
            if problem:
                raise ValueError(problem)
        return value


class PhaseDefinition(_Strict):
    key: str = Field(pattern=KEY)
    label: str = Field(min_length=1, max_length=200)
    steps: list[StepDefinition] = Field(min_length=1)


class EventDefinition(_Strict):
    key: str = Field(pattern=KEY)
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    schedule: Schedule = Field(default_factory=ManualSchedule)
    grace_seconds: int = Field(default=DEFAULT_GRACE_SECONDS, ge=0, le=MAX_GRACE_SECONDS)
    scopes: list[Annotated[str, Field(min_length=1, max_length=190)]] = Field(default_factory=list)
    concurrency_key: str | None = Field(default=None, min_length=1, max_length=150)
    phases: list[PhaseDefinition] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _schedule_shorthand(cls, data: Any) -> Any:
        """Accept ``schedule: manual``, ``schedule: {once: ...}`` and ``schedule: {cron: ...,
        timezone: ...}`` as well as the explicit ``kind`` form."""
        if not isinstance(data, dict) or "schedule" not in data:
            return data
        schedule = data["schedule"]
        if schedule == "manual" or schedule is None:
            schedule = {"kind": "manual"}
        elif isinstance(schedule, dict) and "kind" not in schedule:
            if "once" in schedule:
                schedule = {"kind": "once", "at": schedule["once"], **_without(schedule, "once")}
            elif "cron" in schedule:
                schedule = {"kind": "cron", **schedule}
        return {**data, "schedule": schedule}

    @field_validator("scopes")
    @classmethod
    def _unique_scopes(cls, value: list[str]) -> list[str]:
        # Compared case-blind: MariaDB's default collation does, so "eu" and "EU" would be one
        # occurrence there (the second silently dropped) and two on SQLite.
        folded = [s.casefold() for s in value]
        duplicates = sorted({s for s, f in zip(value, folded, strict=True) if folded.count(f) > 1})
        if duplicates:
            raise ValueError(f"scopes listed twice (letter case does not count): {', '.join(duplicates)}")
        return value

    @field_validator("concurrency_key")
    @classmethod
    def _template(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        try:
            parts = list(string.Formatter().parse(value))
        except ValueError as exc:
            raise ValueError(f"not a valid template: {exc}") from exc
        for _, name, spec, conversion in parts:
            if name is None:
                continue
            if name != "scope" or spec or conversion:
                shown = (
                    "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
                )
                raise ValueError(f"may only use {{scope}} as it is, not {shown}")
        # Filled in, every scope's key (a rehearsal's with its prefix) must fit the column.
        room = CONCURRENCY_KEY_MAX - len(REHEARSAL_KEY_PREFIX)
        for scope in info.data.get("scopes") or [""]:
            filled = value.format(scope=scope)
            if len(filled) > room:
                raise ValueError(
                    f"filled in for scope {scope!r} it is {len(filled)} characters; at most {room} fit"
                )
        return value

    @model_validator(mode="after")
    def _unique_phase_keys(self) -> EventDefinition:
        keys = [p.key for p in self.phases]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"{DUPLICATE_PHASES}; listed twice: {', '.join(duplicates)}")
        return self

    def run_scopes(self) -> list[str]:
        """Each scope is its own occurrence; no scopes means the single scope ''."""
        return list(self.scopes) or [""]

    def concurrency_key_for(self, scope: str) -> str | None:
        return self.concurrency_key.format(scope=scope) if self.concurrency_key else None

    def phase(self, key: str) -> PhaseDefinition | None:
        return next((p for p in self.phases if p.key == key), None)

    def next_phase(self, key: str | None) -> PhaseDefinition | None:
        if key is None:
            return self.phases[0]
        keys = [p.key for p in self.phases]
        index = keys.index(key) + 1 if key in keys else len(keys)
        return self.phases[index] if index < len(keys) else None

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def content_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def publication_problems(definition: EventDefinition, file: str | None) -> list[Problem]:
    """What a new version may not be, though a stored one may (so every version published
    before a limit was set still loads and runs): the size and schedule limits of
    ``runner.limits``, and placeholders in step labels (a cue's title defaults to its label)."""
    problems: list[Problem] = []

    def refuse(message: str, field: str, phase: str | None = None, step: int | None = None) -> None:
        problems.append(Problem(message, file=file, phase=phase, step=step, field=field))

    scopes = definition.run_scopes()
    if len(definition.scopes) > limits.MAX_SCOPES:
        refuse(
            f"{len(definition.scopes)} scopes; an event may have at most {limits.MAX_SCOPES} "
            "(each is a run of its own, announced at Discord's pace)",
            "scopes",
        )
    if len(definition.phases) > limits.MAX_PHASES:
        refuse(f"{len(definition.phases)} phases; an event may have at most {limits.MAX_PHASES}", "phases")
    total = sum(len(p.steps) for p in definition.phases)
    if total > limits.MAX_STEPS:
        refuse(f"{total} steps in all; an event may have at most {limits.MAX_STEPS}", "phases")
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
    return problems


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


def _without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


# ── Validation with locations ───────────────────────────────────────────────


def _phase_key(raw: Any, index: int) -> str:
    phases = raw.get("phases") if isinstance(raw, dict) else None
    if isinstance(phases, list) and index < len(phases) and isinstance(phases[index], dict):
        key = phases[index].get("key")
        if isinstance(key, str) and key:
            return key
    return f"#{index}"


def _locate(raw: Any, loc: tuple[Any, ...], file: str | None) -> tuple[str | None, int | None, str | None]:
    """Turn a pydantic error location into (phase key, step index, field)."""
    phase: str | None = None
    step: int | None = None
    rest = list(loc)
    if len(rest) >= 2 and rest[0] == "phases" and isinstance(rest[1], int):
        phase = _phase_key(raw, rest[1])
        rest = rest[2:]
        if len(rest) >= 2 and rest[0] == "steps" and isinstance(rest[1], int):
            step = rest[1]
            rest = rest[2:]
    # Drop the discriminated union's tag from schedule errors ("schedule.cron.cron" -> "schedule.cron").
    if len(rest) >= 2 and rest[0] == "schedule" and rest[1] in ("manual", "once", "cron"):
        rest = [rest[0], *rest[2:]]
    field = _dotted(rest) or None
    return phase, step, field


def _dotted(parts: list[Any]) -> str:
    # A key that is empty (``"": 1``) is shown quoted, so the place it names is still visible.
    return ".".join(str(p) if p != "" else "''" for p in parts)


def _from_validation_error(
    exc: ValidationError, raw: Any, file: str | None, prefix: tuple[Any, ...] = ()
) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        message = err["msg"]
        phase, step, field = _locate(raw, prefix + loc, file)
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        problems.append(Problem(message=message, file=file, phase=phase, step=step, field=field))
    return problems


def validate(raw: Any, registry: ActionRegistry, *, file: str | None = None) -> EventDefinition:
    """Validate a definition (already parsed from YAML) completely, or raise ``DefinitionError``
    listing every problem with its place."""
    if not isinstance(raw, dict):
        raise DefinitionError([Problem("a definition must be a mapping of fields", file=file)])
    try:
        definition = EventDefinition.model_validate(raw)
    except ValidationError as exc:
        problems = [
            p for p in _from_validation_error(exc, raw, file) if not p.message.startswith(DUPLICATE_PHASES)
        ]
        problems.extend(_duplicate_phase_problems(raw, file))
        # Structural errors hide the params ones; report those too where the structure allows.
        problems.extend(_params_problems_raw(raw, registry, file))
        raise DefinitionError(problems) from None
    problems = publication_problems(definition, file)
    problems.extend(_params_problems(definition, registry, file))
    if problems:
        raise DefinitionError(problems)
    return definition


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
    action_id: Any, params: Any, registry: ActionRegistry, file: str | None, phase: str, index: int
) -> list[Problem]:
    if not isinstance(action_id, str):
        return []
    action = registry.get(action_id)
    if action is None:
        known = ", ".join(registry.described())
        return [
            Problem(
                f"unknown action {action_id!r} (known: {known})",
                file=file,
                phase=phase,
                step=index,
                field="action",
            )
        ]
    try:
        action.params_model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        return [
            Problem(
                message=(
                    err["msg"][len("Value error, ") :]
                    if err["msg"].startswith("Value error, ")
                    else err["msg"]
                ),
                file=file,
                phase=phase,
                step=index,
                field=_dotted(["params", *err["loc"]]),
            )
            for err in exc.errors()
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
    return problems


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


def parse_yaml(text: str | bytes, *, file: str | None = None) -> Any:
    """Parse a definition's YAML (bytes are decoded as UTF-8); ``DefinitionError`` with the line
    and column for anything unreadable."""
    try:
        return yaml_text.parse(yaml_text.decode(text) if isinstance(text, bytes) else text)
    except yaml_text.YamlError as exc:
        raise DefinitionError([Problem(str(exc), file=file)]) from None


def read_file(path: str | Path) -> Any:
    """A definition file, parsed; ``DefinitionError`` naming the file if it cannot be read."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DefinitionError(
            [Problem(f"cannot read the file: {exc.strerror or exc}", file=str(path))]
        ) from None
    return parse_yaml(data, file=str(path))


def load_file(path: str | Path, registry: ActionRegistry) -> EventDefinition:
    return validate(read_file(path), registry, file=str(Path(path)))


def from_spec(spec: dict[str, Any]) -> EventDefinition:
    """Rebuild a stored version's definition (already validated when it was published)."""
    return EventDefinition.model_validate(spec)


# ASCII digits only: Python's ``\d`` and ``float()`` also take other scripts' digits ("٣m"), which
# no author means and no reader of the file would recognise as a number.
_DURATION = re.compile(
    r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9}(?:\.[0-9]{1,9})?)s)?", re.ASCII
)
_NUMBER = re.compile(r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:e[+-]?[0-9]{1,5})?", re.ASCII)


def duration_seconds(value: str | int | float) -> float:
    """``90``, ``"90s"``, ``"5m"``, ``"1h30m"`` -> seconds. A number too large for a float is
    infinite (the caller's upper bound refuses it)."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like '5m' or '1h30m'")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    text = value.strip().lower()
    match = _DURATION.fullmatch(text)
    if not text or not match or not any(match.groups()):
        if _NUMBER.fullmatch(text):
            return float(text)
        raise ValueError(f"{value[:40]!r} is not a duration (use seconds, or text like '5m' or '1h30m')")
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
