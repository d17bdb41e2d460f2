"""``signup:`` on an event: who may come, in which options, how many of each, until when.

Written as staff write it::

    signup:
      options: {tank: 2, healer: 2, dps: 6}   # or a list of names: [going, maybe]
      capacity: 10                             # overall, optional
      closes: 2h                               # before the start, "start" (the default) or "end"
      opens: 7d                                # the message is posted this long before the start
                                               # (default: when the run is booked, about a day
                                               # ahead), optional; needs channel
      late_cancel: 2h                          # a leave this close to the start is flagged
      channel: announcements                   # posted there when a run is booked, optional
      roles: [members]                         # who may sign up (role aliases), optional
      attendee_role: raiders                   # given to the confirmed, optional
      interested: dps                          # the Discord event's Interested sign up
                                               # here (one of the options), optional

The model checks the shape; whether each role alias exists is the config's to say
(``wiring.definition_checks.check_aliases``, beside the steps' aliases).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runner.definitions.durations import bounded_seconds
from runner.definitions.keys import checked_key, repeated
from runner.placeholders import SIGNUP_PLACEHOLDERS

# A sign-up message has one button per option and a Leave button, in Discord's at most five rows
# of five; 20 options leave room and keep the list on the message readable.
MAX_OPTIONS = 20
# An option's name is part of each button's custom id (at most 100 characters with the run id).
OPTION_NAME_MAX = 32
MAX_CAPACITY = 1000
MAX_CLOSES_SECONDS = 14 * 24 * 60 * 60
# A month: a run is booked this far ahead for its message, so the limit bounds the runs waiting.
MAX_OPENS_SECONDS = 30 * 24 * 60 * 60
DEFAULT_LATE_CANCEL_SECONDS = 2 * 60 * 60
MAX_SIGNUP_ROLES = 10
# The overall pool's name in storage: ``checked_key`` keeps every option name from being it.
OVERALL = "*"
CLOSES_AT_START = "start"
# Open while the run is in flight: a sign-up posted by a ``discord.signup`` step during the run
# (a team for the final round, say) takes clicks until the run ends.
CLOSES_AT_END = "end"

# The same rules as a step's channel and ping_role (``actions.messaging``, which runner/ does not
# import): a channel alias or id; a role is named by its alias in the config's roles.
_CHANNEL_REF = re.compile(r"#?[a-z0-9][a-z0-9_-]{0,99}|[0-9]{15,21}", re.ASCII)
# A role: a role is named by its alias in the config's roles.
_ROLE_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", re.ASCII)

# The step that posts a run's sign-up message when ``signup.channel`` does not.
SIGNUP_ACTION = "discord.signup"


def _role_alias(value: str) -> str:
    if not isinstance(value, str) or not _ROLE_ALIAS.fullmatch(value):
        shown = value[:40] if isinstance(value, str) else value
        raise ValueError(
            f"{shown!r} is not a role alias (letters, digits, - and _, starting with a letter or a "
            "digit, at most 100 characters, as in the config's roles)"
        )
    if value.isdigit():
        raise ValueError(f"{value!r} is a role id; name the role by its alias from the config's roles")
    return value


def _option_name(name: str) -> str:
    checked_key(name)
    if len(name) > OPTION_NAME_MAX:
        raise ValueError(
            f"an option's name is at most {OPTION_NAME_MAX} characters ({name[:40]!r} is {len(name)})"
        )
    return name


# Each option is validated at its own place (``signup.options.tank``).
OptionName = Annotated[str, AfterValidator(_option_name)]
OptionCapacity = Annotated[int, Field(ge=1, le=MAX_CAPACITY)]
RoleAlias = Annotated[str, AfterValidator(_role_alias)]


def _channel_ref(value: str) -> str:
    if not _CHANNEL_REF.fullmatch(value):
        raise ValueError(
            f"{value[:40]!r} is not a channel: name a channel alias from the config (lower case "
            "letters, digits, - and _) or a channel id (15 to 21 digits)"
        )
    return value


class SignupDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Option name -> its capacity (``None``: no limit of its own).
    options: dict[OptionName, OptionCapacity | None]
    capacity: int | None = Field(default=None, ge=1, le=MAX_CAPACITY)
    # Seconds before the start at which sign-ups close, at the start, or when the run ends.
    closes: float | Literal["start", "end"] = "start"
    late_cancel: float = float(DEFAULT_LATE_CANCEL_SECONDS)
    # Where the sign-up message is posted when a run is booked; without it a ``discord.signup``
    # step posts it.
    channel: Annotated[str, AfterValidator(_channel_ref)] | None = None
    roles: list[RoleAlias] | None = Field(default=None, min_length=1, max_length=MAX_SIGNUP_ROLES)
    attendee_role: RoleAlias | None = None
    # The option members who marked the run's Discord scheduled event Interested are signed up
    # to (``bot.cogs.signups._import``); without it nobody is imported.
    interested: str | None = None
    # Seconds before the start at which the message is posted (and sign-ups open); ``None``: when
    # the run is booked. Left out of the stored hash when unset (``EventDefinition.canonical_json``).
    opens: float | None = None

    @field_validator("opens", mode="before")
    @classmethod
    def _opens(cls, value: Any) -> float | None:
        return (
            None
            if value is None
            else bounded_seconds(value, "opens (a duration before the start)", MAX_OPENS_SECONDS)
        )

    @model_validator(mode="after")
    def _opens_before_closing(self) -> SignupDefinition:
        if self.opens is None:
            return self
        if self.channel is None:
            raise ValueError(
                "opens needs channel: without one a discord.signup step posts the message when it runs"
            )
        if self.opens <= self.closes_before_start():
            raise ValueError("opens must come before closes (a longer time before the start)")
        return self

    @field_validator("options", mode="before")
    @classmethod
    def _names_alone(cls, value: Any) -> Any:
        """A list of names is options without a capacity of their own."""
        if isinstance(value, list):
            if len(value) > MAX_OPTIONS:
                raise ValueError(f"{len(value)} options; a sign-up may have at most {MAX_OPTIONS}")
            names = [n for n in value if isinstance(n, str)]
            twice = repeated(names)
            if twice:
                raise ValueError(f"options listed twice: {', '.join(twice)}")
            if len(names) != len(value):
                raise ValueError("a list of options holds names only (e.g. [going, maybe])")
            return dict.fromkeys(value)
        return value

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, int | None]) -> dict[str, int | None]:
        if not value:
            raise ValueError("give at least one option (e.g. options: [going] or {tank: 2, dps: 6})")
        if len(value) > MAX_OPTIONS:
            raise ValueError(f"{len(value)} options; a sign-up may have at most {MAX_OPTIONS}")
        return value

    @field_validator("closes", mode="before")
    @classmethod
    def _closes(cls, value: Any) -> Any:
        if value in (CLOSES_AT_START, CLOSES_AT_END):
            return value
        return bounded_seconds(
            value, "closes (a duration before the start, start, or end)", MAX_CLOSES_SECONDS
        )

    @field_validator("late_cancel", mode="before")
    @classmethod
    def _late_cancel(cls, value: Any) -> float:
        return bounded_seconds(value, "late_cancel", MAX_CLOSES_SECONDS)

    @field_validator("roles")
    @classmethod
    def _roles(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        twice = repeated(value)
        if twice:
            raise ValueError(f"roles listed twice: {', '.join(twice)}")
        return value

    @field_validator("interested")
    @classmethod
    def _interested(cls, value: str | None, info: ValidationInfo) -> str | None:
        options = info.data.get("options")
        # Options that were refused are reported at their own place; nothing to check against.
        if value is None or options is None or value in options:
            return value
        raise ValueError(f"{value[:40]!r} is not one of the options ({', '.join(options)})")

    @model_validator(mode="after")
    def _overall_reachable(self) -> SignupDefinition:
        caps = list(self.options.values())
        if self.capacity is not None and None not in caps and sum(c or 0 for c in caps) < self.capacity:
            raise ValueError(
                f"capacity {self.capacity} can never be reached: the options hold {sum(c or 0 for c in caps)} "
                "together (raise an option's capacity or lower the overall one)"
            )
        return self

    @property
    def open_until_the_end(self) -> bool:
        """Whether sign-ups stay open while the run is in flight (``closes: end``)."""
        return self.closes == CLOSES_AT_END

    def closes_before_start(self) -> float:
        """How many seconds before the start sign-ups close (0: at the start, or never before
        it: ``closes: end``)."""
        return float(self.closes) if isinstance(self.closes, float) else 0.0

    def overbooked(self) -> str | None:
        """A warning, not a refusal: options whose seats add up past the overall capacity are
        allowed (the overall one decides), but the message shows seats the event cannot give."""
        caps = list(self.options.values())
        if self.capacity is None or None in caps:
            return None
        total = sum(c or 0 for c in caps)
        if total <= self.capacity:
            return None
        return (
            f"signup: the options hold {total} seats together and the event {self.capacity}: once "
            f"{self.capacity} are taken, members join a waiting list though their option shows seats"
        )

    def role_aliases(self) -> list[str]:
        """Every role alias the sign-up names, for the config check."""
        return [*(self.roles or ()), *([self.attendee_role] if self.attendee_role else [])]


def placeholder_problems(
    signup: SignupDefinition | None, texts: Iterable[tuple[str | None, int | None, str, str]]
) -> list[tuple[str | None, int | None, str, str]]:
    """``{attendees}`` / ``{attendee_count}`` in an event without ``signup:`` would always
    render as nobody: each (phase, step, field, text) that uses one, with why."""
    if signup is not None:
        return []
    found = []
    for phase, step, field, text in texts:
        used = [name for name in SIGNUP_PLACEHOLDERS if "{" + name + "}" in text]
        if used:
            names = " and ".join("{" + name + "}" for name in used)
            found.append((phase, step, field, f"{names} list the run's sign-ups; this event has no signup:"))
    return found
