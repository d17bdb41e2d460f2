"""The bot's configuration: validated once at start, passed down, never built at import time.

Sources, later ones winning: the YAML file, then ``EVENTBOT_*`` environment variables for the
scalar keys (``EVENTBOT_DATABASE_URL``, ``EVENTBOT_GUILD_ID``, ``EVENTBOT_TICK_INTERVAL_SECONDS``,
``EVENTBOT_DEFINITIONS_DIR``, ``EVENTBOT_REHEARSAL_SPEED``). The variables are read by
pydantic-settings (its environment source, with the ``EVENTBOT_`` prefix): names match in any
case, as pydantic-settings matches them, and a variable set to the empty string is ignored, so
``EVENTBOT_GUILD_ID=`` leaves the file's value. The mappings (``channels``, ``roles``,
``permissions``, ``announce``, ``discord_events``, ``retention``) come only from the file. The Discord token is never part of it: it
only ever comes from ``DISCORD_TOKEN`` (see ``token_from_env``), and a config file that contains
one is refused.

A bad config is refused with every problem listed, each naming its key (and the environment
variable, when that is where the value came from). ``ConfigError`` is the only error ``load``
raises, and no problem ever repeats a value that looks like a token or a password.
"""

from __future__ import annotations

import math
import os
import zoneinfo
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from runner import yaml_text
from runner.db import DEFAULT_URL, DatabaseUrlError, check_url
from runner.redaction import Redactor, looks_like_a_discord_token
from wiring.config_sections import (
    NUMBER,
    AnnounceSettings,
    DiscordEventSettings,
    RetentionSettings,
    Strict,
)
from wiring.game_targets import RconServer, WebhookTarget

ENV_PREFIX = "EVENTBOT_"
TOKEN_ENV = "DISCORD_TOKEN"
CAPABILITIES = ("start", "control", "cue", "rehearse", "publish", "signups", "approve")

# The bounds, and why. Discord ids are snowflakes: unsigned 64-bit integers, written in ASCII
# digits (a float would silently round an 18-digit id to another one).
SNOWFLAKE_MAX = 2**64 - 1
# A tick is a handful of queries; the loop already ticks early when a step falls due and at once
# after a command, so a shorter interval only loads the database. Longer than five minutes and a
# run blocked on a concurrency key or a reclaimed lease waits too long to be picked up.
TICK_INTERVAL_MIN, TICK_INTERVAL_MAX = 0.5, 300.0
# Slower than real time is not a rehearsal; at 10,000 the longest wait (7 days) takes a minute,
# and beyond that the waits are shorter than a tick.
REHEARSAL_SPEED_MIN, REHEARSAL_SPEED_MAX = 1.0, 10_000.0
# Aliases are what definitions write (``channel: announcements``); an all-digit alias would be
# read as a raw id, and one starting with "#" as the alias after it.
ALIAS_MAX = 100

SECRET_SHOWN = "<a value that looks like a secret, not shown>"
# A problem repeats what was typed, so a long unbroken run of base64 characters is hidden too: a
# pasted token or password is never repeated back, whatever its shape.
_PROBLEMS = Redactor(mask=SECRET_SHOWN, long_runs=True)


def looks_secret(text: str) -> bool:
    return _PROBLEMS.hides_anything_in(text)


def redact(text: str) -> str:
    """``text`` with anything that looks like a token or a long secret replaced."""
    return _PROBLEMS.redact(text)


class ConfigError(Exception):
    def __init__(self, problems: list[str], source: str | None = None) -> None:
        self.problems = [redact(p) for p in problems]
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__("\n".join(f"{where}{p}" for p in self.problems))


def _snowflake(value: object) -> int:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip()) if len(value.strip()) <= 20 else SNOWFLAKE_MAX + 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a Discord id: a whole number written in the digits 0-9")
    if not 0 < value <= SNOWFLAKE_MAX:
        raise ValueError("must be a Discord id: a positive number below 2**64")
    return value


def _bounded(low: float, high: float, explained: str) -> Any:
    def check(value: object) -> float:
        if isinstance(value, str) and NUMBER.fullmatch(value.strip()):
            value = float(value.strip())
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(explained)
        # Compare before converting: a huge int would overflow float().
        if not (low <= value <= high) or not math.isfinite(value):
            raise ValueError(explained)
        return float(value)

    return BeforeValidator(check)


def _alias(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("an alias is text")
    if (
        not 0 < len(value) <= ALIAS_MAX
        or value.startswith("#")
        or not value.isprintable()
        or value != value.strip()
    ):
        raise ValueError(f"an alias is 1 to {ALIAS_MAX} printable characters, not starting with # or a space")
    if any(c.isspace() for c in value):
        raise ValueError("an alias has no spaces (definitions write it as a single word)")
    if value.isdigit():
        raise ValueError("an alias cannot be all digits: it would be read as a raw id")
    return value


def _database_url(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a database URL, e.g. sqlite+aiosqlite:///eventbot.sqlite3")
    try:
        check_url(value)
    except DatabaseUrlError as exc:
        raise ValueError(str(exc).removeprefix("database url ")) from None
    return value


def _directory(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValueError("must be the path of a directory")
    return value


def _optional_directory(value: object) -> str | None:
    return None if value is None else _directory(value)


def _zone(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be an IANA time zone name like Europe/Berlin")
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {value[:60]!r} (use an IANA name like Europe/Berlin)") from None
    return value


Snowflake = Annotated[int, BeforeValidator(_snowflake)]
Alias = Annotated[str, BeforeValidator(_alias)]


class Config(Strict):
    database_url: Annotated[str, BeforeValidator(_database_url)] = DEFAULT_URL
    # The one guild this bot serves; interactions from any other are refused.
    guild_id: Snowflake | None = None
    # Channel aliases that definitions name (``channel: announcements``) -> channel ids.
    channels: dict[Alias, Snowflake] = Field(default_factory=dict)
    # Role aliases that definitions and permissions name -> role ids.
    roles: dict[Alias, Snowflake] = Field(default_factory=dict)
    # Capability -> role aliases allowed to use it: start (``/event start``), control (pause,
    # resume, cancel, retry, skip), cue (Confirm / Skip on GM cues), rehearse, publish
    # (``/event validate`` and ``/event publish``).
    permissions: dict[str, list[str]] = Field(default_factory=dict)
    # The aliases (keys of ``channels``) of the channels the bot uses itself.
    gm_channel: str | None = None
    staff_log_channel: str | None = None
    # Where a step waiting for an approval asks for it: this alias, else the staff log, else the
    # GM channel. ``approve_from``: the lowest action risk that waits (``runner.approvals``).
    approval_channel: str | None = None
    approve_from: Literal["destructive", "moderate", "never"] = "destructive"
    # One message per run in the staff log channel, edited as the run moves (``bot.cogs.live._loop``).
    live_run_messages: bool = True
    sandbox_channel: str | None = None
    announce: AnnounceSettings = Field(default_factory=AnnounceSettings)
    discord_events: DiscordEventSettings = Field(default_factory=DiscordEventSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    # The webhook receivers ``webhook.post`` steps name by alias (``wiring.game_targets``).
    webhooks: dict[Alias, WebhookTarget] = Field(default_factory=dict)
    # The game servers ``rcon.command`` steps name by alias (``wiring.game_targets``).
    rcon: dict[Alias, RconServer] = Field(default_factory=dict)
    tick_interval_seconds: Annotated[
        float,
        _bounded(
            TICK_INTERVAL_MIN,
            TICK_INTERVAL_MAX,
            f"must be a number of seconds from {TICK_INTERVAL_MIN:g} to {TICK_INTERVAL_MAX:g}",
        ),
    ] = 5.0
    # Where ``python -m bot publish`` (and ``run``, at start) read event definitions from.
    definitions_dir: Annotated[str, BeforeValidator(_directory)] = "events"
    # The zone the times staff type in Discord are read in (``/event create``, ``/event edit``).
    timezone: Annotated[str, BeforeValidator(_zone)] = "UTC"
    # A folder of the operator's own ``/event create`` templates, beside the bundled ones.
    templates_dir: Annotated[str | None, BeforeValidator(_optional_directory)] = None
    # How much faster waits pass in a rehearsal run (``/event rehearse``): 60 = a minute a second.
    rehearsal_speed: Annotated[
        float,
        _bounded(
            REHEARSAL_SPEED_MIN,
            REHEARSAL_SPEED_MAX,
            f"must be a number from {REHEARSAL_SPEED_MIN:g} to {REHEARSAL_SPEED_MAX:g} "
            "(how many times faster than real time waits pass)",
        ),
    ] = 60.0
    # Waits of up to 30 s are slept through by the runner holding the run, so the step after
    # one goes out at its instant (to the millisecond) rather than when a tick finds it. Off
    # only where time is simulated (the tests' offline Discord freezes the clock an in-process
    # sleep would wait on); the runner's own tests cover the holds in real time.
    hold_waits_in_process: bool = True
    # Requests Discord may refuse (401, 403, 429) in 10 minutes before the bot's background
    # loops pause (``bot.invalid_requests``); Discord bans the IP at 10,000.
    invalid_request_budget: Annotated[
        float,
        _bounded(10, 5000, "must be a number of refused requests from 10 to 5000 (Discord bans at 10,000)"),
    ] = 1000

    @model_validator(mode="after")
    def _references_resolve(self) -> Config:
        problems = []
        for key in ("gm_channel", "staff_log_channel", "sandbox_channel", "approval_channel"):
            alias = getattr(self, key)
            if alias is not None and alias not in self.channels:
                problems.append(f"{key}: {alias!r} is not one of the channel aliases in 'channels'")
        for capability, aliases in self.permissions.items():
            if capability not in CAPABILITIES:
                problems.append(
                    f"permissions.{capability}: unknown capability (use {', '.join(CAPABILITIES)})"
                )
            for alias in aliases:
                if alias not in self.roles:
                    problems.append(
                        f"permissions.{capability}: {alias!r} is not one of the role aliases in 'roles'"
                    )
        for alias in self.announce.allowed_ping_roles:
            if alias not in self.roles:
                problems.append(
                    f"announce.allowed_ping_roles: {alias!r} is not one of the role aliases in 'roles'"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def channel_id(self, ref: str) -> int | None:
        """A channel alias or a raw id (``#`` allowed in front of an alias)."""
        ref = ref.lstrip("#")
        if ref.isascii() and ref.isdigit():
            return int(ref)
        return self.channels.get(ref)

    def role_id(self, ref: str) -> int | None:
        # ASCII only: str.isdigit() is true of "²", which int() then refuses or misreads.
        if ref.isascii() and ref.isdigit():
            return int(ref)
        return self.roles.get(ref)

    def aliases_held(self, role_ids: Iterable[int]) -> list[str]:
        """Every role alias whose role a member holds: two aliases may name one role, and a
        rule naming either must see it held."""
        held = set(role_ids)
        return [alias for alias, role_id in self.roles.items() if role_id in held]

    @property
    def approvals_channel(self) -> str | None:
        """Where approval cards go: ``approval_channel``, else the staff log's, else the GM's."""
        return self.approval_channel or self.staff_log_channel or self.gm_channel

    def roles_for(self, capability: str) -> set[int]:
        return {self.roles[a] for a in self.permissions.get(capability, []) if a in self.roles}


class _Overrides(BaseSettings):
    """The keys an ``EVENTBOT_*`` variable may set, as the text it holds: ``Config`` validates
    it with the file's values, so a variable meets the same bounds and the same messages.

    Only its fields are used (by ``_Environment``); it is never instantiated, so nothing reads
    the process environment behind ``load``'s back, and ``Config()`` itself never does."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore")

    database_url: str | None = None
    guild_id: str | None = None
    tick_interval_seconds: str | None = None
    definitions_dir: str | None = None
    rehearsal_speed: str | None = None


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source over the mapping ``load`` was given (the process
    environment unless a caller passes its own), not always ``os.environ``."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(_Overrides)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {
            (name if self.case_sensitive else name.lower()): value
            for name, value in self._environ.items()
            if not (self.env_ignore_empty and value == "")
        }


def _overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The values set by ``EVENTBOT_*`` variables, by key."""
    return {key: value for key, value in _Environment(environ)().items() if value is not None}


def _variable(key: str) -> str:
    return ENV_PREFIX + key.upper()


def _shown_part(part: object) -> str:
    text = str(part)
    if looks_secret(text):
        # Before cutting it short: a cut token no longer looks like one.
        return SECRET_SHOWN
    # Quoted when it could not be read back as one key: a ": " inside it reads as a second field.
    if not text.isprintable() or not text or ": " in text:
        text = repr(text)
    return text if len(text) <= 60 else text[:57] + "..."


def _problems(exc: ValidationError, from_env: Mapping[str, str]) -> list[str]:
    out = []
    for err in exc.errors():
        loc = ".".join(_shown_part(p) for p in err["loc"] if p != "[key]")
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("extra_forbidden", "invalid_key"):
            message = "unknown key"
        elif err["type"] in ("model_type", "dict_type"):
            # pydantic says "a valid dictionary or instance of RetentionSettings": a class name.
            message = "must be a mapping of keys, each on its own line indented under it"
        if not loc:
            out.extend(message.split("; "))
            continue
        if err["loc"][-1] == "[key]":
            loc += " (the alias)"
        variable = from_env.get(str(err["loc"][0]))
        if variable:
            loc += f" (from {variable})"
        out.append(f"{loc}: {message}")
    return out


_WALK_LIMIT = 100_000


def _token_values(data: Mapping[Any, Any]) -> list[str]:
    """The keys (dotted) under which a value shaped like a Discord token was written. Iterative,
    and each container visited once: YAML aliases can make a small file a very large tree."""
    found: list[str] = []
    seen: set[int] = set()
    todo: list[tuple[str, Any]] = [(_shown_part(k), v) for k, v in data.items()]
    while todo and len(seen) < _WALK_LIMIT:
        where, value = todo.pop()
        if isinstance(value, str):
            if looks_like_a_discord_token(value):
                found.append(where)
        elif isinstance(value, dict | list) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            todo.extend((f"{where}.{_shown_part(k)}", v) for k, v in items)
    return sorted(found)


def _read(path: str | Path, source: str) -> dict[Any, Any]:
    try:
        loaded = yaml_text.read(path)
    except OSError as exc:
        raise ConfigError([f"cannot read the config file: {exc.strerror or exc}"], source) from None
    except yaml_text.YamlError as exc:
        raise ConfigError([str(exc)], source) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(["the config file must be a mapping of keys"], source)
    return dict(loaded)


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, merge and validate; raise ``ConfigError`` listing every problem."""
    environ = os.environ if environ is None else environ
    source = str(path) if path else None
    data: dict[Any, Any] = _read(path, str(path)) if path is not None else {}
    problems = []
    never = f"never put the bot token in a file; set {TOKEN_ENV} in the environment"
    if "token" in data or "discord_token" in data:
        problems.append(f"token: {never}")
        data.pop("token", None)
        data.pop("discord_token", None)
    problems.extend(f"{where}: this looks like a Discord bot token; {never}" for where in _token_values(data))
    for key in [key for key in data if not isinstance(key, str)]:
        # Pydantic would name ``true:`` as "1"; say what the file says.
        problems.append(f"{_shown_part(key)}: unknown key")
        del data[key]
    overrides = _overrides(environ)
    data.update(overrides)
    from_env = {key: _variable(key) for key in overrides}
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems + _problems(exc, from_env), source) from None
    if problems:
        raise ConfigError(problems, source)
    return config


def token_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    token = environ.get(TOKEN_ENV, "").strip()
    return token or None
