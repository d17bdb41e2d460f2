"""``python -m bot run`` and ``python -m bot sync``: the bot's life against the real Discord.

``run_bot`` waits for the database and Discord while they cannot be reached, trying again
with a capped backoff (``bot.startup``); what waiting cannot fix stops it with a
``StartupError``. Each attempt builds a new bot, so a failed one leaves nothing half set up.

Commands are synced only by ``sync_commands`` (never in ``on_ready``, which runs on every
reconnect), through a client of its own that holds the command tree and nothing else: syncing
needs neither the database nor the gateway, and the bot has no second, half-built mode for it.

The token is only ever handed to ``discord.py``'s ``login``; it is not stored, logged or put in
any error message.
"""

from __future__ import annotations

import logging

import aiohttp
import discord
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.app import CommandPublisher, EventBot, create_bot, database_shown, sync_tree
from bot.errors import DATABASE_ERRORS, StartupError
from bot.startup import Retry, Unreachable, database_unreachable, discord_unreachable, keep_trying
from runner.db import create_engine
from runner.migrate import alembic_config, current_revision
from wiring.config import Config

log = logging.getLogger(__name__)

TOKEN_REFUSED = "Discord refused the token in DISCORD_TOKEN (it is not a valid bot token)"
# The gateway's close code for a token it does not accept (the REST login's is a 401).
GATEWAY_TOKEN_REFUSED = 4004


async def check_schema(engine: AsyncEngine) -> None:
    """Refuse to start on a database whose schema is behind the code (migrations are explicit).
    A database that does not answer raises ``Unreachable`` (worth another try); one that refuses
    the credentials, or is at another schema, ``StartupError``."""
    where = database_shown(engine)
    try:
        revision = await current_revision(engine)
    except DATABASE_ERRORS as exc:
        raise database_unreachable(exc, where) from None
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if revision != head:
        raise StartupError(
            f"the database at {where} is at schema {revision or 'none'}, this code needs {head}: "
            "run the migrations first (python -m bot migrate)"
        )


async def run_bot(config: Config, token: str, retry: Retry | None = None) -> None:
    """``python -m bot run``: connect with ``token`` and run until stopped (cancelled). The
    engine is built here from ``config.database_url`` and disposed on the way out; nothing is
    published or migrated implicitly.

    While the database or Discord cannot be reached it keeps trying, as ``retry`` says, one log
    line per attempt. Raises ``StartupError`` (one line, no token) for what waiting cannot fix:
    a refused token, a database at another schema. Cancelled, the bot is closed: runs being
    driven finish their step or are given back, and keep their state."""
    if config.guild_id is None:
        # Without it the bot could not tell its own server's interactions from anyone else's.
        raise StartupError("guild_id is not set in the config: the bot serves exactly one server; set its id")
    retry = retry or Retry()
    engine = create_engine(config.database_url)
    announced = False

    async def serve() -> None:
        nonlocal announced
        bot = create_bot(config, engine)
        try:
            await _login(bot, token)
            if not announced:  # once, not again after each gateway that did not answer
                log.info("logged in as %s; serving guild %s", bot.user, config.guild_id)
                announced = True
            await _connect(bot)
        finally:
            # Each attempt builds its own bot and closes it whole (its HTTP session with it),
            # so nothing half set up is carried into the next.
            connected = bot.ws is not None
            await bot.close()
            if connected:
                log.info("disconnected from Discord; the runs in hand here were given back")

    try:
        await keep_trying(lambda: check_schema(engine), retry)
        await keep_trying(serve, retry)
    finally:
        await engine.dispose()


async def _connect(bot: EventBot) -> None:
    """The gateway connection, until the bot is closed; discord.py reconnects by itself once
    it has had one. ``Unreachable`` when the first one fails."""
    try:
        await bot.connect(reconnect=True)
    except discord.ConnectionClosed as exc:
        # A close code discord.py does not reconnect after: waiting will not change Discord's answer.
        if exc.code == GATEWAY_TOKEN_REFUSED:
            raise StartupError(TOKEN_REFUSED) from None
        reason = f": {exc.reason}" if exc.reason else ""
        raise StartupError(f"Discord closed the gateway connection (code {exc.code}){reason}"[:300]) from None
    except discord.ClientException as exc:  # e.g. PrivilegedIntentsRequired (4014)
        raise StartupError(f"Discord refused the gateway connection: {exc}"[:300]) from None
    except AttributeError as exc:
        if bot.ws is not None:
            raise
        # discord.py 2.7 answers a failed first connection by reading the state of the previous
        # one, which does not exist; what failed is the connection underneath.
        cause = exc.__context__
        unreachable = discord_unreachable(cause) if cause is not None else None
        raise unreachable or Unreachable("Discord", "the gateway did not answer") from None


async def sync_commands(config: Config, token: str, guild_id: int | None = None) -> list[str]:
    """``python -m bot sync [--guild ID]``: log in, publish ``/event``, log out. Answers the
    names of the commands Discord now has. ``config`` is what the command line loaded; syncing
    reads nothing from it (the guild is chosen by the caller). Tries once: ``StartupError`` or
    ``Unreachable`` say, in one line, why it did not work."""
    client = CommandPublisher()
    async with client:
        await _login(client, token)
        try:
            synced = await sync_tree(client, guild_id)
        except discord.Forbidden as exc:
            where = "globally" if guild_id is None else f"in guild {guild_id}"
            raise StartupError(
                f"Discord refused to register the commands {where}: {exc.status} {exc.text} "
                "(is the bot in that server, invited with the applications.commands scope?)"[:300]
            ) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise _discord_failure(exc, "Discord did not register the commands") from None
    return [command.name for command in synced]


def _discord_failure(exc: BaseException, doing: str) -> Unreachable | StartupError:
    unreachable = discord_unreachable(exc)
    if unreachable is not None:
        return unreachable
    if isinstance(exc, discord.HTTPException):
        return StartupError(f"{doing}: {exc.status} {exc.text}"[:300])
    return StartupError(f"{doing}: {type(exc).__name__}")


async def _login(client: discord.Client, token: str) -> None:
    try:
        await client.login(token)
    except discord.LoginFailure:
        raise StartupError(TOKEN_REFUSED) from None
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        raise _discord_failure(exc, "Discord did not accept the login") from None
