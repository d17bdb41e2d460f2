"""Starting the bot: the factory, the refusal to start on a database behind the code, the token
kept out of every message, and syncing as an explicit step."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bot.app import CommandPublisher, create_bot, sync_tree
from bot.errors import StartupError
from bot.serving import run_bot
from bot.startup import Retry
from runner.db import create_engine
from tests.bot.conftest import Sim

TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.secret-token-that-must-never-be-printed"


async def test_run_refuses_a_database_whose_schema_is_behind(
    sim: Sim, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Migrations are explicit: a bot started on an unmigrated database stops with one line that
    says what to run, before it logs in, and the token is in neither the message nor the logs."""
    caplog.set_level(logging.DEBUG)
    url = f"sqlite+aiosqlite:///{tmp_path / 'empty.sqlite3'}"
    config = sim.config.model_copy(update={"database_url": url})
    with pytest.raises(StartupError) as caught:
        await run_bot(config, TOKEN)
    message = str(caught.value)
    assert "\n" not in message
    assert "is at schema none" in message and "python -m bot migrate" in message
    assert TOKEN not in message and "secret-token" not in caplog.text


async def test_run_refuses_to_start_without_a_guild_to_serve(sim: Sim) -> None:
    """With no guild_id the bot could not refuse another server's interactions."""
    with pytest.raises(StartupError, match="guild_id is not set") as caught:
        await run_bot(sim.config.model_copy(update={"guild_id": None}), TOKEN)
    assert "\n" not in str(caught.value)


async def test_run_keeps_trying_a_database_it_cannot_reach_until_it_answers(sim: Sim, tmp_path: Path) -> None:
    """A database that is not there yet (a volume mounted after the service starts) is tried
    again, one log line per attempt, until it answers; then start-up carries on (here to the
    schema check, which stops it: the new file has no tables)."""
    directory = tmp_path / "mounted-later"
    url = f"sqlite+aiosqlite:///{directory / 'db.sqlite3'}"
    attempts: list[str] = []

    class Mount(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            attempts.append(record.getMessage())
            if len(attempts) == 2:
                directory.mkdir()

    watcher = Mount()
    logging.getLogger("bot.startup").addHandler(watcher)
    try:
        with pytest.raises(StartupError, match="is at schema none"):
            config = sim.config.model_copy(update={"database_url": url})
            await asyncio.wait_for(run_bot(config, TOKEN, Retry(first=0.01, cap=0.02)), 30)
    finally:
        logging.getLogger("bot.startup").removeHandler(watcher)
    assert len(attempts) == 2
    for attempt, delay in zip(attempts, ("0.01", "0.02"), strict=True):
        assert attempt.startswith("cannot reach the database at sqlite+aiosqlite:///")
        assert attempt.endswith(f"; retrying in {delay} s") and "\n" not in attempt


async def test_sync_publishes_the_event_group_globally_or_to_one_guild(sim: Sim) -> None:
    synced = await sync_tree(sim.bot)
    assert [c.name for c in synced] == ["event", "events"]
    assert sim.requests("PUT", f"/applications/{sim.bot.application_id}/commands")
    subcommands = {o.name for o in synced[0].options}
    assert subcommands == {
        "start",
        "rehearse",
        "pause",
        "resume",
        "retry",
        "cancel",
        "skip",
        "status",
        "health",
        "list",
        "upcoming",
        "validate",
        "publish",
        "create",
        "edit",
        "export",
        "signups",
        "attendance",
        "history",
        "skip-date",
        "move-date",
    }


async def test_each_bot_is_built_from_its_arguments_alone(sim: Sim, tmp_path: Path) -> None:
    """No import-time state: two bots on two databases share nothing."""
    other_engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'other.sqlite3'}")
    try:
        first, second = create_bot(sim.config, sim.engine), create_bot(sim.config, other_engine)
        assert first.engine is sim.engine and second.engine is other_engine
        assert first.tree is not second.tree
        assert first.ticker is None, "nothing runs before setup_hook"
    finally:
        await other_engine.dispose()


async def test_the_event_cog_is_loaded_as_an_extension_through_its_setup(sim: Sim) -> None:
    """``setup()`` in the cog module was dead code (the bot added the cog itself); now
    ``setup_hook`` loads ``bot.cogs.control._cog`` as an extension, whose ``setup`` adds the cog and
    its "Start anyway" button, and a restarted bot loads it again."""
    assert "bot.cogs.control._cog" in sim.bot.extensions
    assert sim.bot.get_cog("EventCog") is not None
    restarted = await sim.start_bot()
    assert "bot.cogs.control._cog" in restarted.extensions
    assert [c.name for c in restarted.tree.get_commands()] == ["event", "events"]


async def test_sync_publishes_what_the_serving_bot_answers_from_a_client_with_only_the_commands(
    sim: Sim,
) -> None:
    """``python -m bot sync`` used to build the bot in a second, database-less mode
    (``EventBot(config, None)``, whose ``services`` raised on use). It now logs in a client of
    its own that holds the command tree and nothing else (no database, no services, no loops),
    and what it publishes is exactly the ``/event`` the serving bot answers."""
    path = f"/applications/{sim.bot.application_id}/guilds/{sim.guild.id}/commands"
    await sync_tree(sim.bot, sim.guild.id)
    served = sim.requests("PUT", path)[-1].json
    publisher = CommandPublisher()
    await sim.env.restart_bot(publisher)
    synced = await sync_tree(publisher, sim.guild.id)
    assert [c.name for c in synced] == ["event", "events"]
    assert sim.requests("PUT", path)[-1].json == served
    assert not hasattr(publisher, "services") and not hasattr(publisher, "ticker")
    await sim.start_bot()


async def test_the_bot_has_its_services_from_the_moment_it_is_built(sim: Sim) -> None:
    """One mode: a bot is built on a database and has its services at once (nothing to check
    for a missing database before use); only the loops wait for ``setup_hook``."""
    bot = create_bot(sim.config, sim.engine)
    assert bot.services.engine is sim.engine
    assert bot.delivery is bot.services.delivery
    assert bot.ticker is None and bot.staff_log is None
