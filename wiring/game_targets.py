"""Where events reach the game: the webhook receivers a ``webhook.post`` step names by alias.

A target is written in the config (``webhooks: {rewards: {url: ..., secret_env: ...}}``); its
signing secret is read from the environment variable the config names, never from the file, so
the config can be committed. A URL is http or https, with no credentials in it.
"""

from __future__ import annotations

import base64
import os
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
