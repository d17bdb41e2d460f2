"""The real bot, built by ``create_bot``, on a migrated SQLite database, in a simulated Discord.

simcord runs the bot's real ``login`` / ``setup_hook`` against a fake HTTP API and gateway. The
bot needs the ids of the simulated guild, channels and roles in its config, and those exist only
once the simulation runs, so the ``simcord_bot`` it starts with is a bare placeholder and the
``sim`` fixture swaps the real bot in with ``env.restart_bot`` (the same call a test uses to
simulate a restart). No token and no network are involved.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import discord
import pytest
import simcord
from discord.ext import commands
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from bot.app import EventBot, create_bot, sync_tree
from runner import catalog, definitions
from runner.history import Actor
from runner.views import list_runs, run_view
from tests.support.definitions import announce, cue, event, phase, wait
from wiring.config import Config

TICK = 5.0
HERE = Path(__file__).parent
# simcord gives the bot this long, in real seconds, to settle after each action. Its default (5 s)
# is tight for an ``advance_time`` that runs a dozen ticks on a machine busy with other tests;
# it only bounds how long a genuinely stuck bot takes to fail.
SETTLE_TIMEOUT = 30.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents and item.get_closest_marker("simcord") is None:
            item.add_marker(pytest.mark.simcord(settle_timeout=SETTLE_TIMEOUT))


@pytest.fixture
def simcord_bot() -> discord.Client:
    return commands.Bot(command_prefix=commands.when_mentioned, intents=discord.Intents.default())


def raid_spec(**overrides: Any) -> dict[str, Any]:
    """An event as staff would write it: an announcement with a ping and an embed, a GM cue, a
    wait, and a closing announcement."""
    spec = event(
        "raid",
        phase(
            "muster",
            announce(
                "@everyone The raid on the harbour begins! Meet at the docks.",
                label="Call to arms",
                ping_role="players",
                embed={
                    "title": "Harbour Raid",
                    "description": "Bring a boat.",
                    "colour": "#ff8800",
                    "fields": [{"name": "Where", "value": "The docks", "inline": True}],
                },
            ),
            cue(
                "Open the harbour gates in game, then press Confirm.", label="Open the gates", ping_role="gm"
            ),
        ),
        phase(
            "finale",
            wait(60, label="Let them fight"),
            announce("The harbour is ours!", label="Victory"),
        ),
        title="Harbour Raid",
    )
    spec.update(overrides)
    return spec


@dataclass
class Sim:
    """The simulated server, the database and the bot, with the people who use them."""

    env: simcord.Env
    engine: AsyncEngine
    guild: simcord.GuildHandle
    channels: dict[str, simcord.ChannelHandle]
    roles: dict[str, simcord.RoleHandle]
    mod: simcord.MemberActor
    gm: simcord.MemberActor
    player: simcord.MemberActor
    config: Config
    bots: list[EventBot] = field(default_factory=list)

    @property
    def bot(self) -> EventBot:
        return self.env.bot  # type: ignore[return-value]

    def __getattr__(self, name: str) -> simcord.ChannelHandle:
        channels = self.__dict__.get("channels", {})
        if name in channels:
            return channels[name]
        raise AttributeError(name)

    def now(self) -> dt.datetime:
        return self.env.now().replace(tzinfo=None)

    async def publish(self, spec: dict[str, Any]) -> catalog.Published:
        definition = definitions.validate(spec, validation_registry())
        return await catalog.publish(self.engine, definition, self.now(), actor=Actor(None, "test"))

    async def start_bot(self, config: Config | None = None, **options: Any) -> EventBot:
        """(Re)start the bot process: a new ``create_bot``; only the database and the simulated
        world carry over."""
        bot = create_bot(config or self.config, self.engine, **options)
        if isinstance(self.env.bot, EventBot):
            # A restart is a clean stop, as SIGTERM or Ctrl-C make it: the work the old process
            # held moves at once (a crash, which waits for its leases: test_active_active).
            await self.env.bot.stop_work()
        await self.env.restart_bot(bot)
        await sync_tree(bot, self.guild.id)
        self.bots.append(bot)
        return bot

    async def run(self, run_id: int) -> Any:
        return await run_view(self.engine, run_id, catalog.VersionCache())

    async def only_run(self) -> Any:
        runs = await list_runs(self.engine)
        assert len(runs) == 1, runs
        return await self.run(runs[0].id)

    def requests(self, method: str, path: str) -> list[simcord.HttpLogEntry]:
        return [r for r in self.env.http_requests if r.method == method and r.path == path]

    def posts_to(self, channel: simcord.ChannelHandle) -> list[simcord.HttpLogEntry]:
        return self.requests("POST", f"/channels/{channel.id}/messages")


def buttons(message: discord.Message) -> list[tuple[str | None, str | None, bool]]:
    """A message's buttons as (label, custom id, disabled)."""
    return [(b.label, b.custom_id, b.disabled) for row in message.components for b in row.children]  # type: ignore[attr-defined]


def make_config(
    guild: simcord.GuildHandle,
    channels: dict[str, simcord.ChannelHandle],
    roles: dict[str, simcord.RoleHandle],
    **overrides: Any,
) -> Config:
    """The bot's config for this world: channel and role aliases are the dicts' keys."""
    data: dict[str, Any] = {
        "database_url": "sqlite+aiosqlite:///unused.sqlite3",
        "guild_id": guild.id,
        "channels": {alias: c.id for alias, c in channels.items()},
        "roles": {name: r.id for name, r in roles.items()},
        "permissions": {
            "start": ["moderator"],
            "control": ["moderator"],
            "rehearse": ["moderator"],
            "cue": ["gm"],
        },
        "gm_channel": "gm_cues",
        "staff_log_channel": "staff_log",
        "sandbox_channel": "sandbox",
        "announce": {"allowed_ping_roles": ["players"]},
        "tick_interval_seconds": TICK,
        # simcord freezes the clock while the bot settles: a hold would wait on it for ever.
        "hold_waits_in_process": False,
    }
    data.update(overrides)
    return Config.model_validate(data)


@pytest.fixture
async def sim(sqlite_engine: AsyncEngine, simcord_env: simcord.Env) -> AsyncIterator[Sim]:
    env = simcord_env
    guild = env.create_guild("Harbour Town", id=111_111_111_111_111_111)
    channels = {
        name.replace("-", "_"): guild.create_text_channel(name)
        for name in ("announcements", "gm-cues", "staff", "staff-log", "sandbox", "general")
    }
    roles = {
        "moderator": guild.create_role("Moderator"),
        "gm": guild.create_role("GM"),
        "players": guild.create_role("Players", mentionable=True),
    }
    sim = Sim(
        env=env,
        engine=sqlite_engine,
        guild=guild,
        channels=channels,
        roles=roles,
        mod=guild.add_member(env.create_user("mod"), roles=[roles["moderator"]]),
        gm=guild.add_member(env.create_user("gm"), roles=[roles["gm"]]),
        player=guild.add_member(env.create_user("player"), roles=[roles["players"]]),
        config=make_config(guild, channels, roles),
    )
    with env.time_context():
        await sim.publish(raid_spec())
        await sim.start_bot()
    yield sim


# Two bot processes on one database (``tests/bot/two_processes.py``), for the exactly-once tests.
# One engine for both: two engines on one SQLite file wait for each other's write lock with real
# sleeps, which simcord's frozen clock never lets end.
@pytest.fixture
async def pair(sim: Sim) -> AsyncIterator[Any]:
    from tests.bot.two_processes import Pair

    both = Pair(sim, sim.engine)
    try:
        yield both
    finally:
        await both.close()


@pytest.fixture
def timing(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.bot.two_processes import Timing

    return Timing(sim, monkeypatch)
