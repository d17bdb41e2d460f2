"""Where events reach the game: the webhook receivers a ``webhook.post`` step names by alias, and
the RCON servers an ``rcon.command`` step names by alias.

A target is written in the config (``webhooks: {rewards: {url: ..., secret_env: ...}}``,
``rcon: {survival: {host: ..., port: 25575, password_env: ...}}``); its secret is read from the
environment variable the config names, never from the file, so the config can be committed. A
URL is http or https, with no credentials in it.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from wiring.config_sections import Strict

# The Standard Webhooks scheme writes a secret as ``whsec_`` + base64 of the key bytes.
SECRET_PREFIX = "whsec_"


class WebhookTarget(Strict):
    url: str
    # The environment variable holding the HMAC-SHA256 key; unset: requests go unsigned.
    secret_env: str | None = None
    # Seconds for the whole request (connect, send, answer); cut to the step's budget.
    timeout_seconds: float = Field(default=5.0, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// address")
        if parts.username or parts.password:
            raise ValueError("must not carry a user or password (put the secret in secret_env)")
        return value

    def secret(self, environ: Mapping[str, str] | None = None) -> bytes | None:
        """The signing key, from the environment; None when none is configured or it is unset."""
        if not self.secret_env:
            return None
        raw = (environ if environ is not None else os.environ).get(self.secret_env)
        if not raw:
            return None
        if raw.startswith(SECRET_PREFIX):
            return base64.b64decode(raw[len(SECRET_PREFIX) :])
        return raw.encode("utf-8")


# An environment variable's name as a shell writes it (the config holds the name, never the value).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RconServer(Strict):
    """A game server's Source RCON port (Minecraft's ``rcon.port``, 25575 by default)."""

    host: str = Field(min_length=1, max_length=253)
    port: int = Field(default=25575, ge=1, le=65535)
    # The environment variable holding the RCON password (every RCON server asks for one).
    password_env: str
    # Seconds for connecting, logging in and the command's reply; cut to the step's budget.
    timeout_seconds: float = Field(default=5.0, gt=0, le=30)

    @field_validator("password_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "must be the name of an environment variable (letters, digits, _), not a password"
            )
        return value

    def password(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The password, from the environment; None when the variable is unset or empty."""
        return (environ if environ is not None else os.environ).get(self.password_env) or None
