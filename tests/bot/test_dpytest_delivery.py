"""The message flows, through the real Discord delivery and discord.py, in dpytest's simulator.

simcord drives the whole bot (slash commands, buttons, roles); dpytest is the second simulator,
kept for what it models well on discord.py 2.7: a guild, text channels, channel permissions and
the messages discord.py's ``channel.send`` builds (content, embeds, nonce). Its 0.7 backend cannot
create roles or carry message components, so the GM cue (buttons) stays with simcord, and it
drops ``allowed_mentions`` from what it records, so the mention policy is pinned there too. Here
a run is started and ticked by the composition root's own runner (``wiring.services.assemble``),
its announcement goes out through ``DiscordDelivery`` into dpytest's fake HTTP, and the staff log
reports it through ``StaffLog``, the way the bot does after every tick.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import discord
import discord.ext.test as dpytest
import pytest
from discord.ext import commands
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.background import Background
from bot.channel_budget import ChannelBudget
from bot.cogs.staff_log._loop import StaffLog
from bot.discord_delivery import DiscordDelivery
from bot.rendering import REHEARSAL_MARK
from runner import catalog
from runner.clock import ManualClock, SystemClock
from runner.definitions import EventDefinition
from runner.history import Actor
from tests.support.definitions import announce, event, phase
from wiring.config import Config
from wiring.services import Services, assemble

T0 = dt.datetime(2026, 9, 2, 12, 0, 0)
PLAYERS = 4_242_424_242_424_242


@pytest.fixture
async def bot() -> AsyncIterator[commands.Bot]:
    intents = discord.Intents.default()
    intents.members = True
    client = commands.Bot(command_prefix="!", intents=intents)
    await client._async_setup_hook()  # what login() would do: dpytest never logs in
    dpytest.configure(client, text_channels=["announcements", "staff-log", "sandbox"])
    yield client
    await dpytest.empty_queue()


class Flow:
    """One guild in dpytest, the bot's services on a migrated SQLite database, a staff log."""

    def __init__(self, bot: commands.Bot, engine: AsyncEngine) -> None:
        setup = dpytest.get_config()
        self.guild = setup.guilds[0]
        self.announcements, self.staff_channel, self.sandbox = setup.channels[:3]
        self.config = Config(
            guild_id=self.guild.id,
            channels={
                "announcements": self.announcements.id,
                "staff": self.staff_channel.id,
                "sandbox": self.sandbox.id,
            },
            roles={"players": PLAYERS},
            staff_log_channel="staff",
            sandbox_channel="sandbox",
            announce={"allowed_ping_roles": ["players"]},
        )
        self.engine = engine
        self.services: Services = assemble(
            engine, lambda describe: DiscordDelivery(bot, self.config, describe), clock=ManualClock(T0)
        )
        kit = Background(
            client=bot,
            config=self.config,
            engine=engine,
            versions=self.services.versions,
            # The wall clock, far past the runs' simulated start: a run's lines do not wait
            # for a live message (there is none here).
            clock=SystemClock(),
            bus=self.services.runner.bus,
            budget=ChannelBudget(),
            owner="dpytest",
        )
        self.staff_log = StaffLog(kit, interval=5.0)

    async def publish(self) -> None:
        spec = event(
            "raid",
            phase(
                "muster",
                announce(
                    "The raid on the harbour begins!",
                    label="Call to arms",
                    ping_role="players",
                    embed={
                        "title": "Harbour Raid",
                        "colour": "#ff8800",
                        "fields": [{"name": "Where", "value": "The docks"}],
                    },
                ),
            ),
            title="Harbour Raid",
        )
        await catalog.publish(self.engine, EventDefinition.model_validate(spec), T0)
        await self.staff_log.prime()

    async def run(self, *, rehearsal: bool = False) -> None:
        started = await self.services.controls.start(
            "raid", actor=Actor(None, "Mod (42)"), rehearsal=rehearsal
        )
        assert started.ok, started
        await self.services.runner.tick()
        await self.staff_log.post_new()


def sent() -> list[discord.Message]:
    messages = []
    while not dpytest.sent_queue.empty():
        messages.append(dpytest.get_message())
    return messages


async def test_an_announcement_goes_out_through_discord_py_and_the_staff_log_reports_the_run(
    bot: commands.Bot, sqlite_engine: AsyncEngine
) -> None:
    flow = Flow(bot, sqlite_engine)
    await flow.publish()
    await flow.run()
    announcement, staff = sent()

    assert announcement.channel.id == flow.announcements.id
    assert announcement.content == f"<@&{PLAYERS}> The raid on the harbour begins!"
    (embed,) = announcement.embeds
    assert (embed.title, embed.colour, [(f.name, f.value) for f in embed.fields]) == (
        "Harbour Raid",
        discord.Colour(0xFF8800),
        [("Where", "The docks")],
    )
    # The step's idempotency key, cut to Discord's 25 characters: Discord's own dedupe.
    assert isinstance(announcement.nonce, str) and len(announcement.nonce) == 25
    assert int(announcement.nonce, 16) >= 0

    assert staff.channel.id == flow.staff_channel.id
    lines = staff.content.splitlines()
    assert len(lines) == 2, lines
    assert "**Harbour Raid** · run 1 started by Mod" in lines[0]
    assert "**Harbour Raid** · run 1" in lines[1] and "completed" in lines[1]


async def test_a_rehearsal_posts_only_in_the_sandbox_and_marked(
    bot: commands.Bot, sqlite_engine: AsyncEngine
) -> None:
    flow = Flow(bot, sqlite_engine)
    await flow.publish()
    await flow.run(rehearsal=True)
    posted = [m for m in sent() if m.channel.id != flow.staff_channel.id]

    assert [m.channel.id for m in posted] == [flow.sandbox.id]
    assert posted[0].content.startswith(REHEARSAL_MARK)
    assert "The raid on the harbour begins!" in posted[0].content


async def test_a_channel_the_bot_may_not_post_in_pauses_the_run_naming_the_permission(
    bot: commands.Bot, sqlite_engine: AsyncEngine
) -> None:
    flow = Flow(bot, sqlite_engine)
    await dpytest.set_permission_overrides(flow.guild.default_role, flow.announcements, send_messages=False)
    await flow.publish()
    await flow.run()
    (staff,) = sent()

    assert staff.channel.id == flow.staff_channel.id
    assert "paused" in staff.content
    assert f"the bot may not post in #announcements ({flow.announcements.id}): missing Send Messages" in (
        staff.content
    )
