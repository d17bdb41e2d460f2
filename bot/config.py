"""The bot's configuration: validated once at start, passed down, never built at import time.

Sources, later ones winning: the YAML file, then ``EVENTBOT_*`` environment variables for the
scalar keys (``EVENTBOT_DATABASE_URL``, ``EVENTBOT_GUILD_ID``, ``EVENTBOT_TICK_INTERVAL_SECONDS``,
``EVENTBOT_DEFINITIONS_DIR``). The Discord token is never part of it: it only ever comes from
``DISCORD_TOKEN`` (see ``token_from_env``), and a config file that contains one is refused.

A bad config is refused with every problem listed, each naming its key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.db import DEFAULT_URL

ENV_PREFIX = "EVENTBOT_"
TOKEN_ENV = "DISCORD_TOKEN"
SNOWFLAKE = r"^[0-9]{15,21}$"
CAPABILITIES = ("start", "control", "cue", "rehearse")


class ConfigError(Exception):
    def __init__(self, problems: list[str], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__("\n".join(f"{where}{p}" for p in problems))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnnounceSettings(_Strict):
    # Role aliases (from ``roles``) that an announcement may ping; any other mention is inert.
    allowed_ping_roles: list[str] = Field(default_factory=list)
    # Whether ``@everyone`` / ``@here`` written in event text actually ping. Off by default:
    # a typo in an event definition must not ping a whole community.
    allow_everyone: bool = False


class Config(_Strict):
    database_url: str = DEFAULT_URL
    # The one guild this bot serves; interactions from any other are refused.
    guild_id: int | None = None
    # Channel aliases that definitions name (``channel: announcements``) -> channel ids.
    channels: dict[str, int] = Field(default_factory=dict)
    # Role aliases that definitions and permissions name -> role ids.
    roles: dict[str, int] = Field(default_factory=dict)
    # Capability -> role aliases allowed to use it: start (``/event start``), control (pause,
    # resume, cancel, retry, skip), cue (Confirm / Skip on GM cues), rehearse.
    permissions: dict[str, list[str]] = Field(default_factory=dict)
    # The aliases (keys of ``channels``) of the channels the bot uses itself.
    gm_channel: str | None = None
    staff_log_channel: str | None = None
    sandbox_channel: str | None = None
    announce: AnnounceSettings = Field(default_factory=AnnounceSettings)
    tick_interval_seconds: float = Field(default=5.0, gt=0, le=300)
    # Where ``python -m bot publish`` (and ``run``, at start) read event definitions from.
    definitions_dir: str = "events"
    # How much faster waits pass in a rehearsal run (``/event rehearse``): 60 = a minute a second.
    rehearsal_speed: float = Field(default=60.0, ge=1)

    @model_validator(mode="after")
    def _references_resolve(self) -> Config:
        problems = []
        for key in ("gm_channel", "staff_log_channel", "sandbox_channel"):
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
        for name, value in [*self.channels.items(), *self.roles.items()]:
            if value <= 0:
                problems.append(f"{name}: ids are positive numbers")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def channel_id(self, ref: str) -> int | None:
        """A channel alias or a raw id (``#`` allowed in front of an alias)."""
        ref = ref.lstrip("#")
        if ref.isdigit():
            return int(ref)
        return self.channels.get(ref)

    def role_id(self, ref: str) -> int | None:
        if ref.isdigit():
            return int(ref)
        return self.roles.get(ref)

    def roles_for(self, capability: str) -> set[int]:
        return {self.roles[a] for a in self.permissions.get(capability, []) if a in self.roles}


_ENV_KEYS = {
    "DATABASE_URL": "database_url",
    "GUILD_ID": "guild_id",
    "TICK_INTERVAL_SECONDS": "tick_interval_seconds",
    "DEFINITIONS_DIR": "definitions_dir",
    "REHEARSAL_SPEED": "rehearsal_speed",
}


def _problems(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "config"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        if loc == "config" or not err["loc"]:
            out.extend(message.split("; "))
        else:
            out.append(f"{loc}: {message}")
    return out


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, merge and validate; raise ``ConfigError`` listing every problem."""
    environ = os.environ if environ is None else environ
    source = str(path) if path else None
    data: dict[str, Any] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError([f"cannot read the config file: {exc.strerror or exc}"], source) from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ConfigError([f"YAML syntax error{where}: {getattr(exc, 'problem', exc)}"], source) from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(["the config file must be a mapping of keys"], source)
        data = dict(loaded)
    problems = []
    if "token" in data or "discord_token" in data:
        problems.append(f"token: never put the bot token in a file; set {TOKEN_ENV} in the environment")
        data.pop("token", None)
        data.pop("discord_token", None)
    for suffix, key in _ENV_KEYS.items():
        value = environ.get(ENV_PREFIX + suffix)
        if value not in (None, ""):
            data[key] = value
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems + _problems(exc), source) from None
    if problems:
        raise ConfigError(problems, source)
    return config


def token_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    token = environ.get(TOKEN_ENV, "").strip()
    return token or None
