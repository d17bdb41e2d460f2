"""The pydantic models staff author in YAML: an event, its phases and steps, and its schedule.

A model accepts what may be stored and run; what a new version may not be although a stored one
may (the size and schedule limits) is ``runner.definitions.validation``'s to say.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import string
import zoneinfo
from typing import Annotated, Any, Literal

from cronsim import CronSim, CronSimError
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runner import limits
from runner.definitions import cron_dates
from runner.definitions.conditions import StepCondition
from runner.definitions.durations import bounded_seconds, grace_seconds, shown_duration
from runner.definitions.keys import checked_key, repeated
from runner.definitions.signup import SignupDefinition
from runner.states import OnFailure

DEFAULT_GRACE_SECONDS = 900
MAX_GRACE_SECONDS = 7 * 24 * 60 * 60
DUPLICATE_PHASES = "phase keys must be unique"
# event_runs.concurrency_key is VARCHAR(190); a rehearsal run's key carries this prefix so it never
# holds (or waits on) the key of the live event it imitates.
CONCURRENCY_KEY_MAX = 190
REHEARSAL_KEY_PREFIX = "rehearsal:"
# Reminders are stored as steps of the run under this phase key, which ``KEY`` keeps any author
# from writing (a key may not start with ``_``), so a phase of that name can never collide.
REMINDERS_PHASE = "_reminders"
REMINDER_ACTION = "discord.announce"
# A reminder written ``to: attendees``: a direct message to each seated member (``actions.attendee_dms``).
ATTENDEE_REMINDER_ACTION = "discord.dm_attendees"
REMINDER_OWN = ("before", "label", "to")  # a reminder's own fields, written beside its action's
MAX_REMINDERS = 5
MAX_REMINDER_LEAD_SECONDS = 7 * 24 * 60 * 60
MAX_DURATION_SECONDS = 7 * 24 * 60 * 60
# Discord's limits for a guild scheduled event's name, description and location.
DISCORD_EVENT_NAME_MAX = 100
DISCORD_EVENT_DESCRIPTION_MAX = 1000
DISCORD_EVENT_LOCATION_MAX = 100


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
    # Dates without an occurrence, and dates whose occurrence starts at another local time
    # (``runner.definitions.cron_dates``).
    skip: Annotated[list[dt.date], AfterValidator(sorted)] = Field(default_factory=list)
    moves: dict[dt.date, dt.datetime] = Field(default_factory=dict)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
            # OSError: with the ``tzdata`` package installed, a name too long for a file name
            # fails in the file lookup itself rather than as "not found".
            shown = value if len(value) <= 60 else value[:60] + "…"
            raise ValueError(f"unknown time zone {shown!r} (use an IANA name like Europe/Berlin)") from exc
        return value

    @field_validator("cron")
    @classmethod
    def _expression(cls, value: str) -> str:
        if len(value.split()) != 5:
            # cronsim's own words for it ("Wrong number of fields", "Bad day-of-month" when a
            # seconds field shifts the rest) do not say how many fields cron has.
            raise ValueError(
                f"invalid cron expression {value[:60]!r}: use five fields "
                "(minute hour day-of-month month day-of-week), e.g. '0 20 * * FRI'"
            )
        try:
            CronSim(value, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        except (CronSimError, ValueError, KeyError, IndexError, OverflowError) as exc:
            raise ValueError(f"invalid cron expression {value[:60]!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _dates(self) -> CronSchedule:
        moves = {day: cron_dates.local_move(at, self.timezone) for day, at in self.moves.items()}
        found = cron_dates.problems(self.cron, self.timezone, self.skip, moves)
        if found:
            raise ValueError("; ".join(found))
        object.__setattr__(self, "moves", dict(sorted(moves.items())))
        return self

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
                if isinstance(key, bool):
                    return (
                        f"{where or 'params'}: the key {key!r} is not text: YAML reads a bare on, off, "
                        'yes or no as true or false, so write it in quotes ("on": …)'
                    )
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


def _plain_params(value: Any) -> Any:
    """The ``params`` of a step or a reminder: JSON's values only (see ``_not_plain``)."""
    if isinstance(value, dict):
        problem = _not_plain(value)
        if problem:
            raise ValueError(problem)
    return value


class ReminderDefinition(_Strict):
    """A message sent a while before each scheduled occurrence starts. Written flat: ``before``
    (the lead time) beside the announcement's own fields (``channel``, ``content``, ``embed``,
    ``ping_role``), which are checked exactly as a ``discord.announce`` step's params."""

    before: float
    label: str | None = Field(default=None, max_length=200)
    to: Literal["attendees"] | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        if isinstance(data, dict) and "params" not in data:
            return {
                **{k: v for k, v in data.items() if k in REMINDER_OWN},
                "params": {k: v for k, v in data.items() if k not in REMINDER_OWN},
            }
        return data

    @field_validator("before", mode="before")
    @classmethod
    def _lead(cls, value: Any) -> float:
        return bounded_seconds(value, "a reminder's lead time", MAX_REMINDER_LEAD_SECONDS)

    _plain_values = field_validator("params", mode="before")(_plain_params)

    def shown_lead(self) -> str:
        """``1h``, ``15m``, ``1h30m``: the lead as a person reads it."""
        return shown_duration(self.before)


def reminder_action(to: Any) -> str:
    """The action a reminder is performed (and its fields checked) with."""
    return ATTENDEE_REMINDER_ACTION if to == "attendees" else REMINDER_ACTION


class DiscordEventDefinition(_Strict):
    """The server's Events-tab entry mirrored for each scheduled occurrence."""

    # A channel alias from the config or a channel id (a voice or stage channel makes the entry
    # point at it; any other channel is shown as "#name"), or where the event happens, as text.
    location: str = Field(default="Discord", min_length=1, max_length=DISCORD_EVENT_LOCATION_MAX)
    # Defaults to the event's own description.
    description: str | None = Field(default=None, max_length=DISCORD_EVENT_DESCRIPTION_MAX)


class StepDefinition(_Strict):
    action: str
    label: str | None = Field(default=None, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    on_failure: OnFailure = OnFailure.PAUSE
    # Runs only when a named earlier cue was confirmed, or skipped (``definitions.conditions``).
    when: StepCondition | None = None

    _plain_values = field_validator("params", mode="before")(_plain_params)


class PhaseDefinition(_Strict):
    key: str
    label: str = Field(min_length=1, max_length=200)
    steps: list[StepDefinition] = Field(min_length=1)

    _key_words = field_validator("key")(checked_key)


class EventDefinition(_Strict):
    key: str
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    schedule: Schedule = Field(default_factory=ManualSchedule)
    grace_seconds: int = Field(default=DEFAULT_GRACE_SECONDS, ge=0, le=MAX_GRACE_SECONDS)
    scopes: list[Annotated[str, Field(min_length=1, max_length=190)]] = Field(default_factory=list)
    concurrency_key: str | None = Field(default=None, min_length=1, max_length=150)
    # How long the event is expected to last, in seconds (written like a wait: ``1h30m``); the
    # mirrored Discord event ends this long after it starts.
    duration: float | None = None
    reminders: list[ReminderDefinition] = Field(default_factory=list, max_length=MAX_REMINDERS)
    # ``None``: as the config says; ``false``: never; ``true`` or a mapping: mirrored.
    discord_event: DiscordEventDefinition | bool | None = None
    # Sign-ups for each run (``runner.definitions.signup``); none when left out.
    signup: SignupDefinition | None = None
    phases: list[PhaseDefinition] = Field(min_length=1)

    _key_words = field_validator("key")(checked_key)

    @field_validator("grace_seconds", mode="before")
    @classmethod
    def _grace(cls, value: Any) -> int:
        return grace_seconds(value, MAX_GRACE_SECONDS)

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return None if value is None else bounded_seconds(value, "the duration", MAX_DURATION_SECONDS)

    # Field validators rather than one model validator, so each problem is located at the field
    # it is about; each needs a field declared before it, which is only in ``info.data`` when it
    # was valid itself (and is then reported on its own).
    @field_validator("reminders")
    @classmethod
    def _distinct_leads(
        cls, value: list[ReminderDefinition], info: ValidationInfo
    ) -> list[ReminderDefinition]:
        twice = sorted(shown_duration(lead) for lead in repeated(r.before for r in value))
        if twice:
            raise ValueError(f"two reminders with the same lead time: {', '.join(twice)}")
        if value and isinstance(info.data.get("schedule"), ManualSchedule):
            raise ValueError(
                "reminders are sent before scheduled occurrences; this event has no schedule "
                "(give it schedule: {cron: ..., timezone: ...} or {once: ...})"
            )
        return value

    @field_validator("discord_event")
    @classmethod
    def _mirror_needs_duration(
        cls, value: DiscordEventDefinition | bool | None, info: ValidationInfo
    ) -> DiscordEventDefinition | bool | None:
        if value not in (None, False) and "duration" in info.data and info.data["duration"] is None:
            raise ValueError(
                "discord_event needs the event's expected duration (duration: 1h30m): a Discord "
                "event shows when it ends"
            )
        return value

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
        if len(value) > limits.MAX_SCOPES:
            # Refused before anything looks at each scope (validation says it in full).
            return value
        duplicates = repeated(value, [s.casefold() for s in value])
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
        duplicates = repeated(p.key for p in self.phases)
        if duplicates:
            raise ValueError(f"{DUPLICATE_PHASES}; listed twice: {', '.join(duplicates)}")
        if any(step.action == ATTENDEE_REMINDER_ACTION for phase in self.phases for step in phase.steps):
            # Its DMs say "starts in ...": one not sent by the start is dropped, which a step is not.
            raise ValueError(
                f"{ATTENDEE_REMINDER_ACTION} is a reminder's: write it under reminders: with to: attendees"
            )
        return self

    def run_scopes(self) -> list[str]:
        """Each scope is its own occurrence; no scopes means the single scope ''."""
        return list(self.scopes) or [""]

    def concurrency_key_for(self, scope: str) -> str | None:
        return self.concurrency_key.format(scope=scope) if self.concurrency_key else None

    def discord_event_settings(self, mirror_by_default: bool) -> DiscordEventDefinition | None:
        """How this event is mirrored to Discord's Events tab, or ``None`` when it is not."""
        if isinstance(self.discord_event, DiscordEventDefinition):
            return self.discord_event
        if self.discord_event is True or (self.discord_event is None and mirror_by_default):
            return DiscordEventDefinition() if self.duration is not None else None
        return None

    def longest_reminder_lead(self) -> float:
        return max((r.before for r in self.reminders), default=0.0)

    def phase(self, key: str) -> PhaseDefinition | None:
        return next((p for p in self.phases if p.key == key), None)

    def next_phase(self, key: str | None) -> PhaseDefinition | None:
        if key is None:
            return self.phases[0]
        keys = [p.key for p in self.phases]
        index = keys.index(key) + 1 if key in keys else len(keys)
        return self.phases[index] if index < len(keys) else None

    def canonical_json(self) -> str:
        dumped = self.model_dump(mode="json")
        # Left out when unset, so a version published before sign-ups existed hashes as it did.
        if dumped.get("signup") is None:
            dumped.pop("signup", None)
        else:
            # Likewise a sign-up written before ``interested`` or ``opens`` existed.
            for field in ("interested", "opens"):
                if dumped["signup"].get(field) is None:
                    dumped["signup"].pop(field, None)
        # Likewise reminders written before ``to`` existed.
        for reminder in (r for r in dumped["reminders"] if r.get("to") is None):
            reminder.pop("to", None)
        # Likewise steps written before a step could have a condition.
        for step in (step for phase in dumped["phases"] for step in phase["steps"]):
            if step.get("when") is None:
                step.pop("when", None)
        # Likewise a schedule written before skipped and moved dates existed.
        for field in [name for name, value in dumped["schedule"].items() if value in ([], {})]:
            dumped["schedule"].pop(field)
        return json.dumps(dumped, sort_keys=True, separators=(",", ":"))

    def content_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def _without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}
