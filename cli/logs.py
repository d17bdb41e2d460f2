"""The log lines every command writes to standard error.

``--log-format text`` (the default) is one line a record for people; ``json`` is one object a
line for log collectors, with ``time``, ``level``, ``logger``, ``message`` and whatever ids the
record carries (``run_id``, ``step_id``, ``interaction_id``...: the code passes them as
``extra``). The libraries underneath (discord.py, Alembic, SQLAlchemy, aiohttp) say only
warnings and errors unless asked for more with ``-v``.

Whatever a line says, the bot token and the database password are replaced by ``***``: the
code never logs them, and the filter here is there for the day a library or an exception does.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from runner.redaction import Redactor, password_of

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Quiet unless -v: each says at INFO what an operator has no use for (Alembic's "Context impl
# SQLiteImpl", discord.py's "logging in using static token").
THIRD_PARTY = ("discord", "alembic", "sqlalchemy", "aiohttp", "asyncmy", "aiosqlite", "asyncio")
# Every attribute a LogRecord has of its own; the rest came in through ``extra``.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


class RedactingFilter(logging.Filter):
    """Hides secrets (``runner.redaction``'s rules) in a record's message, arguments, extras and
    traceback."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the message: the handler reports that
            return True
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, self.redact(value))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the record's extras, and the
    traceback as ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, str | int | float | bool | None) else str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Ours, so that configuring again replaces it rather than adding a second."""

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        super().__init__(stream)
        self.redactor = redactor
        self.addFilter(RedactingFilter(redactor))

    def format(self, record: logging.LogRecord) -> str:
        # Again on the finished line: a formatter may add text of its own.
        return self.redactor.redact(super().format(record))


class _OneLineReconnect(logging.Filter):
    """discord.py logs each lost gateway connection with a full traceback; an operator needs
    what happened and when it tries again, on one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Attempting a reconnect in %.2fs" and record.exc_info:
            error = record.exc_info[1]
            reason = f"{type(error).__name__}: {error}".rstrip(": ") if error else "unknown"
            record.msg = "lost the connection to Discord (%s); reconnecting in %.1f s"
            record.args = (reason, *(record.args or ()))
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def secrets_from(environ: Mapping[str, str]) -> list[str]:
    """The secrets the environment holds: the bot token and the database URL's password."""
    found = [environ.get("DISCORD_TOKEN", "").strip()]
    url = environ.get("EVENTBOT_DATABASE_URL", "")
    found.append(password_of(url) or "")
    return [secret for secret in found if secret]


def configure(
    level: int,
    *,
    quiet_libraries: bool,
    log_format: str = "text",
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> logging.Handler | None:
    """Send log records at ``level`` and above to ``stream`` (standard error) as ``log_format``
    says. Does nothing when the root logger already has a handler that is not ours (whoever
    set it up, a test harness or an embedding program, decides), as ``logging.basicConfig``."""
    root = logging.getLogger()
    if any(not isinstance(handler, _Handler) for handler in root.handlers):
        return None
    for handler in list(root.handlers):
        root.removeHandler(handler)
    redactor = Redactor(secrets_from(os.environ if environ is None else environ))
    handler = _Handler(stream or sys.stderr, redactor)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING) if quiet_libraries else level)
    # SQLAlchemy's INFO is every statement it runs: a debugging aid, so only with debug logs.
    logging.getLogger("sqlalchemy").setLevel(level if level <= logging.DEBUG else logging.WARNING)
    client = logging.getLogger("discord.client")
    for old in [f for f in client.filters if isinstance(f, _OneLineReconnect)]:
        client.removeFilter(old)
    if level > logging.DEBUG:
        client.addFilter(_OneLineReconnect())
    return handler


def keep_secret(secret: str | None) -> None:
    """Have every log line and error from now on hide ``secret`` too (a password read from the
    config)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, _Handler):
            handler.redactor.keep(secret)


def redacted(text: str) -> str:
    """``text`` (an error for the terminal) with the secrets hidden as the log lines hide them:
    by the logging handler's redactor, which knows the config's password too once it is read."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, _Handler):
            return handler.redactor.redact(text)
    return Redactor(secrets_from(os.environ)).redact(text)
