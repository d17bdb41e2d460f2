"""``rcon.command``: one command to a game server over Source RCON (Minecraft, ARK, Factorio, ...).

* **Where.** The step names a server by alias (``rcon:`` in the config, ``wiring.game_targets``);
  its password comes from the environment variable the config names, and is never written to a
  log, an answer or a message.
* **How.** One connection per command: log in, send, read the reply, close. The protocol is the
  ``rcon`` package's (its packets and exchange); the connection is opened and closed here, so a
  timeout never leaves a socket behind.
* **Answers.** The reply (its first ``REPLY_MAX`` characters, Minecraft's colour codes removed) is
  kept on the step and shown in the staff log. A refused password is terminal and names the
  server. A server that cannot be reached, or does not answer the login in time, is transient:
  nothing was sent, so the runner tries again. Once the command is out, a missing reply is
  terminal: RCON has no idempotency key, and sending ``/spawn`` again might spawn twice, so a
  person looks at the game and retries the step (``/event retry``) if it did not happen.
* **Undo.** A step may give ``undo`` (a command): the answer then says how to undo it, and a
  cancel with cleanup sends that command to the same server (``runner.engine.cleanup``).
* **Rehearsal.** A rehearsal run connects to nothing: the step says what it would have sent.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from rcon.exceptions import EmptyResponse, SessionTimeout, WrongPassword
from rcon.source.async_rcon import communicate
from rcon.source.proto import Packet, Type

from actions.messaging import Describe
from actions.webhook import WouldSend
from runner.registry import Action, Envelope
from runner.states import AnswerKey
from wiring.game_targets import RconServer

ACTION_ID = "rcon.command"
BUDGET_MS = 15_000
# What is kept of a server's reply on the step (a Discord message holds 2,000).
REPLY_MAX = 1500
# Minecraft refuses a command packet with a longer payload (bytes); other games allow about as much.
COMMAND_MAX = 1446
# Left of the step's budget for the settle after the command.
MARGIN_SECONDS = 1.0
# Minecraft's formatting codes (``§a``, ``§l``): noise once the reply is out of the game.
_COLOUR_CODE = re.compile("\u00a7.", re.DOTALL)


class RconParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    server: str = Field(description="an RCON server alias from the config (rcon:)")
    command: str = Field(description="the command, sent exactly as written (e.g. /say hello)")
    undo: str | None = Field(
        default=None, description="the command that undoes it, sent by a cancel with cleanup"
    )

    @field_validator("command", "undo")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise ValueError("a command must not be empty")
        if any(c in value for c in "\r\n\x00"):
            raise ValueError("a command is one line (no line breaks)")
        size = len(value.encode("utf-8"))
        if size > COMMAND_MAX:
            raise ValueError(f"a command is at most {COMMAND_MAX} bytes (Minecraft's limit); this is {size}")
        return value


class NotSent(Exception):
    """The exchange failed before the command went out: nothing happened in the game."""


class Unanswered(Exception):
    """The command went out and no reply came: the game may or may not have run it."""


# One exchange: (host, port, password, command, seconds) -> the reply. Tests pass their own.
Exchange = Callable[[str, int, str, str, float], Awaitable[str]]


async def exchange(host: str, port: int, password: str, command: str, seconds: float) -> str:
    """Log in, send ``command``, answer its reply; ``WrongPassword`` for a refused password,
    ``NotSent`` or ``Unanswered`` for the rest, the connection closed on every path."""
    sent = False
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(seconds):
            reader, writer = await asyncio.open_connection(host, port)
            response = await communicate(reader, writer, Packet.make_login(password))
            # A Source server answers a login with an empty value, then the auth response.
            while response.type != Type.SERVERDATA_AUTH_RESPONSE:
                response = await Packet.aread(reader)
            if response.id == -1:
                raise WrongPassword()
            request = Packet.make_command(command)
            sent = True
            response = await communicate(reader, writer, request)
            if response.id != request.id:
                raise SessionTimeout()
            payload: bytes = response.payload
            return payload.decode("utf-8", "replace")
    except (TimeoutError, OSError, EmptyResponse, SessionTimeout, ValueError) as exc:
        # ValueError: the library read a packet that is not Source RCON (a wrong port).
        what = "no answer in time" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise (Unanswered if sent else NotSent)(what.rstrip(": ")) from exc
    finally:
        if writer is not None:
            writer.close()


def shown_reply(text: str) -> str:
    return _COLOUR_CODE.sub("", text).strip()[:REPLY_MAX]


def _terminal(error: str) -> dict[str, Any]:
    return {AnswerKey.OK: False, AnswerKey.RETRY: False, AnswerKey.ERROR: error[:500]}


def rcon_action(
    servers: Mapping[str, RconServer],
    describe: Describe,
    *,
    send: Exchange | None = None,
    environ: Mapping[str, str] | None = None,
    budget_ms: int = BUDGET_MS,
    rehearsed: WouldSend | None = None,
) -> Action[RconParams]:
    """``rehearsed``: where a rehearsal run shows what it would have sent (the console's)."""
    talk = send or exchange

    async def perform(envelope: Envelope, params: RconParams) -> dict[str, Any]:
        server = servers.get(params.server)
        known = ", ".join(sorted(servers)) or "none are configured"
        missing = f"no RCON server {params.server!r} in the config's rcon ({known})"
        undo = (
            {
                "action": ACTION_ID,
                "params": {"server": params.server, "command": params.undo},
                "label": f"{params.undo} (rcon {params.server})",
            }
            if params.undo is not None
            else None
        )
        if not envelope.verify:
            context = await describe(envelope.run_id, envelope.step_id)
            if context is not None and context.rehearsal:
                # Sent nowhere, so neither the server nor its password is needed: a rehearsal
                # works on a machine they were never put on, and says what a live run would lack.
                shown = {"would_send": params.server, "command": params.command}
                if rehearsed is not None:
                    lacking = "" if server is not None else f"; a live run would fail: {missing}"
                    what = f"would send to rcon {params.server}: {params.command}{lacking}"
                    await rehearsed(envelope.run_id, envelope.step_id, envelope.scope, what)
                return {AnswerKey.OK: True, AnswerKey.OUTPUT: shown, AnswerKey.UNDO: undo}
        if server is None:
            return _terminal(missing)
        password = server.password(environ)
        if password is None:
            return _terminal(
                f"RCON server {params.server!r}: the environment variable {server.password_env} is not set"
            )
        if envelope.verify:
            return {AnswerKey.OK: True}
        seconds = max(min(server.timeout_seconds, budget_ms / 1000 - MARGIN_SECONDS), 0.5)
        where = f"rcon {params.server} ({server.host}:{server.port})"
        try:
            reply = await talk(server.host, server.port, password, params.command, seconds)
        except WrongPassword:
            return _terminal(
                f"{where} refused the password in {server.password_env}: set the server's RCON "
                "password there (Minecraft: rcon.password in server.properties)"
            )
        except NotSent as exc:
            # Transient: nothing reached the game, so trying again cannot do it twice.
            return {AnswerKey.OK: False, AnswerKey.ERROR: f"{where}: not sent, {exc}"[:500]}
        except Unanswered as exc:
            return _terminal(
                f"{where}: the command was sent but {exc}; check the game, then retry the step "
                "if it did not happen (a command is never sent twice on its own)"
            )
        kept = {"server": params.server, "command": params.command, "reply": shown_reply(reply)}
        return {AnswerKey.OK: True, AnswerKey.OUTPUT: kept, AnswerKey.UNDO: undo}

    return Action(
        id=ACTION_ID,
        label="Send an RCON command",
        risk="moderate",
        reversible="automatic",
        version=1,
        budget_ms=budget_ms,
        params_model=RconParams,
        perform=perform,
        description="Sends one command to a game server over Source RCON and keeps its reply.",
    )
