"""Starting the bot when Discord or the database is not there yet: what is worth trying again,
how long to wait, and one plain line per attempt.

A bot restarted with its host (a reboot, a network that comes up after the service, a database
container still starting) must not die at its first refused connection, nor print a traceback
an operator has to read. What cannot get better by waiting (a refused token, a database behind
the code, a wrong database password) is still one line and an exit at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import discord
import yarl

from bot.errors import StartupError
from runner import backoff

log = logging.getLogger(__name__)
T = TypeVar("T")

# Where discord.py sends its REST requests, and where it opens the gateway. Set only to reach
# something standing in for Discord: a test's loopback server, or a proxy an operator runs in
# front of the real API. discord.py has no setting of its own for either; these replace the
# class attributes it reads (``Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY``).
API_BASE_ENV = "EVENTBOT_DISCORD_API"
GATEWAY_ENV = "EVENTBOT_DISCORD_GATEWAY"

# MariaDB's answers that no amount of waiting changes: access denied (to the server or to the
# database) and no such database. Everything else DATABASE_ERRORS matches is a server not up yet.
_REFUSED_BY_THE_DATABASE = {1044, 1045, 1049, 1698}


@dataclass(frozen=True)
class Retry:
    """How long to wait between start-up attempts: ``first`` seconds, doubling up to ``cap``."""

    first: float = 2.0
    cap: float = 60.0

    def delay(self, attempt: int) -> float:
        return backoff.delay(attempt, first=self.first, cap=self.cap)


class Unreachable(Exception):
    """Discord or the database did not answer; trying again later may well work."""

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"cannot reach {what}: {reason}")


def use_api_base_from_env(environ: Mapping[str, str] | None = None) -> None:
    """Point discord.py at ``EVENTBOT_DISCORD_API`` / ``EVENTBOT_DISCORD_GATEWAY`` when set."""
    environ = os.environ if environ is None else environ
    base = environ.get(API_BASE_ENV, "").strip()
    if base:
        discord.http.Route.BASE = base.rstrip("/")
    gateway = environ.get(GATEWAY_ENV, "").strip()
    if gateway:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)


def quiet_voice() -> None:
    """The bot never joins a voice channel; discord.py's warning that voice support is missing
    would only make an operator wonder what to install."""
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False


def discord_unreachable(exc: BaseException) -> Unreachable | None:
    """``exc`` as "Discord cannot be reached" if it is that, else ``None``."""
    if isinstance(exc, discord.DiscordServerError) or (
        isinstance(exc, discord.HTTPException) and exc.status == 429
    ):
        # The status and its phrase only: a 502's body is often a proxy's whole HTML page.
        phrase = getattr(exc.response, "reason", None) or ""
        return Unreachable("Discord", f"Discord answered {exc.status} {phrase}".strip())
    if isinstance(exc, TimeoutError):
        return Unreachable("Discord", "no answer in time")
    if isinstance(exc, aiohttp.ClientConnectorError):
        # "Cannot connect to host discord.com:443 ssl:default [...]" says it twice; the OS's
        # reason (refused, no route, name not resolved) is what the operator acts on.
        return Unreachable("Discord", f"{exc.host}:{exc.port}: {_os_reason(exc.os_error)}")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return Unreachable("Discord", _plain(exc))
    return None


def database_unreachable(exc: BaseException, where: str) -> Unreachable | StartupError:
    """``exc`` (one of DATABASE_ERRORS) as worth retrying or not."""
    original = getattr(exc, "orig", None) or exc
    args: tuple[Any, ...] = getattr(original, "args", ())
    code = args[0] if args and isinstance(args[0], int) else None
    reason = f"{args[1]} (error {code})" if code is not None and len(args) > 1 else _plain(original)
    if code in _REFUSED_BY_THE_DATABASE:
        return StartupError(f"the database at {where} refused the connection: {reason}")
    return Unreachable(f"the database at {where}", reason)


def _os_reason(error: OSError) -> str:
    # asyncio words a refused connection "Connect call failed ('1.2.3.4', 443)"; the errno says
    # it plainly. A failed name lookup's errno is its own (negative), with its own words.
    if isinstance(error, socket.gaierror) or not error.errno:
        return error.strerror or str(error) or type(error).__name__
    return os.strerror(error.errno).lower()


def _plain(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def keep_trying(attempt: Callable[[], Awaitable[T]], retry: Retry) -> T:
    """Await ``attempt()`` until it does not raise ``Unreachable``, waiting between tries as
    ``retry`` says and logging one line each time. Anything else it raises ends the loop."""
    failures = 0
    while True:
        try:
            return await attempt()
        except Unreachable as exc:
            delay = retry.delay(failures)
            failures += 1
            log.warning("%s; retrying in %s", exc, _seconds(delay), extra={"attempt": failures})
        await asyncio.sleep(delay)


def _seconds(delay: float) -> str:
    return f"{delay:g} s"
