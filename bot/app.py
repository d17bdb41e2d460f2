"""The Discord bot: ``create_bot`` (the factory), and the ``/event`` command tree as it is synced.

Everything comes in through the constructor: the validated config and the database engine, from
which the engine's services are wired to the Discord delivery at once. There is no import-time
state, so a test builds as many bots as it likes (one per simulated restart). ``setup_hook``
loads the extensions (the ``/event`` cog and the GM cue buttons, as discord.py's
``advanced_startup.py`` loads its cogs) and starts the tick and staff-log loops.

``python -m bot run`` and ``sync`` (the bot against the real Discord) are in ``bot.serving``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Protocol

import discord
from discord import app_commands
from discord.ext import commands
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import plugin_problems
from bot.background import Background, LeasedLoop
from bot.channel_budget import ChannelBudget
from bot.claims import InteractionGate
from bot.clock import DiscordClock
from bot.cogs.attendance._cog import add_commands as add_attendance_commands
from bot.cogs.authoring._cog import add_commands as add_authoring_commands
from bot.cogs.control._cog import EventCog
from bot.cogs.events_tab._loop import Mirror
from bot.cogs.live._loop import LiveRuns
from bot.cogs.players._cog import players_commands
from bot.cogs.publishing._drafts import Drafts
from bot.cogs.reminders._cog import reminder_commands
from bot.cogs.reminders._loop import AttendeeReminders
from bot.cogs.signups._import import SignupImports
from bot.cogs.signups._messages import SignupMessages
from bot.cogs.signups._roles import AttendeeRoles
from bot.cogs.signups._staff import add_commands as add_signup_commands
from bot.cogs.signups._threads import EventThreads
from bot.cogs.staff_log._loop import StaffLog
from bot.discord_delivery import DiscordDelivery
from bot.errors import DATABASE_ERRORS
from bot.invalid_requests import InvalidRequests
from bot.startup import (
    database_unreachable,
    quiet_voice,
)
from bot.ticker import Ticker
from bot.tree import GuardedTree
from bot.work_lease import LEASE_PASSES, WorkLease
from bridge.exclusive import ExternalClaims, WorkLeases
from bridge.listings import ListingService
from runner.clock import Clock
from runner.engine import RunnerSettings, serving_settings
from runner.redaction import masked_url
from wiring.config import Config
from wiring.services import Services, assemble

log = logging.getLogger(__name__)

# Loaded by ``setup_hook``; each module's ``setup`` adds what belongs to it.
STAFF_LOG_WORK = "staff-log"

EXTENSIONS = ("bot.cogs.cues._cog", "bot.cogs.control._cog", "bot.cogs.signups._cog", "bot.cogs.authoring._cog", "bot.cogs.attendance._cog", "bot.cogs.players._cog", "bot.cogs.reminders._cog", "bot.cogs.approvals._cog")  # fmt: skip


class EventBot(commands.Bot):
    def __init__(
        self,
        config: Config,
        engine: AsyncEngine,
        *,
        clock: Clock | None = None,
        runner_settings: RunnerSettings | None = None,
        owner: str | None = None,
    ) -> None:
        quiet_voice()
        # Every 401, 403 and 429 counted, so the loops pause well before Discord bans the IP.
        the_clock: Clock = clock or DiscordClock()
        invalid_requests = InvalidRequests(
            int(config.invalid_request_budget), now=lambda: the_clock.now().timestamp()
        )
        super().__init__(
            http_trace=invalid_requests.trace_config(),
            command_prefix=commands.when_mentioned,
            help_command=None,
            # Only the guilds intent: interactions carry the member and their roles, so no
            # privileged intent (members, message content) is needed.
            intents=discord.Intents.default(),
            tree_cls=GuardedTree,
            # Nothing the bot says pings anyone unless a message says otherwise (announcements).
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.config = config
        self.engine = engine
        self.invalid_requests = invalid_requests
        invalid_requests.on_change = self._invalid_requests_changed
        self.clock = the_clock
        # Every send and edit to a channel takes a slot first (Discord's 5 per 5 s per channel).
        self.channel_budget = ChannelBudget()
        self.services: Services[DiscordDelivery] = assemble(
            engine,
            lambda describe: DiscordDelivery(self, config, describe, self.channel_budget),
            clock=self.clock,
            settings=runner_settings or self._runner_settings(config),
            owner=owner,
            drive_starts=True,
            webhooks=config.webhooks,
            rcon=config.rcon,
        )
        # Another process may share token and database: interactions are claimed, work leased.
        process = self.services.runner.owner
        self.interaction_gate = InteractionGate(ExternalClaims(engine, process), self.clock)
        self.work_leases = WorkLeases(engine, process, seconds=LEASE_PASSES * config.tick_interval_seconds)
        # What every background loop works with; each follows the runner's bus for its wake-ups.
        self.kit = Background(
            client=self,
            config=config,
            engine=engine,
            versions=self.services.versions,
            clock=self.clock,
            bus=self.services.runner.bus,
            budget=self.channel_budget,
            owner=process,
        )
        self.ticker: Ticker | None = None
        self.staff_log: StaffLog | None = None
        # What /event publish previewed and waits for Publish or Cancel: this process's alone.
        self.publish_drafts = Drafts()
        self.interaction_gate.elsewhere.append(self.publish_drafts.elsewhere)
        interval = config.tick_interval_seconds
        # The live run messages: their own loop, so a slow or refused edit never holds up a run.
        self.live_runs = LiveRuns(self.kit, lease=self.lease_for("live-run-messages"), interval=interval)
        self.add_listener(self.live_runs.on_raw_message_delete, "on_raw_message_delete")
        # The event threads (attendees added, archived at the run's end) and the attendee roles.
        self.event_threads = EventThreads(self.kit, lease=self.lease_for("event-threads"), interval=interval)
        self.attendee_roles = AttendeeRoles(
            self.kit, lease=self.lease_for("attendee-roles"), interval=interval
        )
        events = config.discord_events
        # The Events-tab mirror: its own loop, so a refused or slow request never holds up a run.
        self.mirror = Mirror(
            self.kit,
            ListingService(
                engine,
                self.services.versions,
                self.clock,
                process,
                horizon_seconds=events.horizon,
                max_listed=events.max_listed,
                mirror_by_default=events.mirror,
            ),
            lease=self.lease_for("events-mirror"),
            interval=interval,
        )
        desk = self.services.signups
        # Sign-up messages and promotion notices (``bot.cogs.signups._messages``).
        self.signup_messages = SignupMessages(
            self.kit, desk, lease=self.lease_for("signup-messages"), interval=interval
        )
        # A ``discord.signup`` step's message is the loop's to post, as the booking's is.
        self.services.delivery.signup_poster = self.signup_messages
        # Reminders to attendees by DM: the delivery writes them when one falls due, the loop sends.
        self.attendee_reminders = AttendeeReminders(
            self.kit, lease=self.lease_for("reminder-dms"), interval=interval
        )
        self.services.delivery.attendee_dms = self.attendee_reminders
        # The Discord event's Interested members imported as sign-ups (``signup.interested``).
        self.signup_imports = SignupImports(
            self.kit, desk, lease=self.lease_for("signup-import"), interval=interval
        )

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        # Every interaction reaches this listener, handled or not; the tree's and the buttons'
        # checks await the same claim, so one this process cannot claim is answered late here
        # (the database cannot be reached) even when nothing handles it.
        await self.interaction_gate.claimed(interaction)

    def lease_for(self, work: str) -> WorkLease:
        """The lease on ``work``, which only one process sharing the database does at a time;
        paused while Discord refuses too much, except the staff log's, which says so."""
        paused = (lambda: False) if work == STAFF_LOG_WORK else (lambda: self.invalid_requests.backing_off)
        return WorkLease(self.work_leases, work, self.clock.now, paused)

    def _invalid_requests_changed(self, backing_off: bool) -> None:
        budget = self.invalid_requests.budget
        if backing_off:
            self.kit.tell_staff(
                f"⚠️ Discord refused {budget} or more of the bot's requests in 10 minutes (401, 403 or 429): "
                "sign-up messages, attendee roles, threads, the Events tab and live messages pause "
                f"until fewer than {budget // 2}, far below the 10,000 at which Discord bans the IP. "
                "/event health shows the count."
            )
        else:
            self.kit.tell_staff("✅ Discord's refusals are back under the budget: background work resumes.")

    @property
    def delivery(self) -> DiscordDelivery:
        return self.services.delivery

    @staticmethod
    def _runner_settings(config: Config) -> RunnerSettings:
        settings = serving_settings(config.tick_interval_seconds, rehearsal_speed=config.rehearsal_speed)
        if not config.hold_waits_in_process:
            settings = dataclasses.replace(settings, hold_in_process_seconds=0.0)
        # Mirrored occurrences are materialised as far ahead as they are listed.
        return dataclasses.replace(
            settings,
            listing_horizon_seconds=config.discord_events.horizon,
            list_by_default=config.discord_events.mirror,
            keep_run_log_seconds=config.retention.keep_seconds,
            retention_batch=config.retention.batch,
            approve_from=config.approve_from,
        )

    async def setup_hook(self) -> None:
        try:
            await self._set_up()
        except DATABASE_ERRORS as exc:
            # Here, not in the login's handler: a driver's bare OSError would read as Discord's.
            raise database_unreachable(exc, database_shown(self.engine)) from None

    async def _set_up(self) -> None:
        # Here, not in __init__: a simulated Discord installs its own HTTP client before login.
        self.invalid_requests.watch(self.http)
        for problem in plugin_problems(self.services.registry):
            log.warning("action plugin refused, none of its actions registered: %s", problem)
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        self.staff_log = StaffLog(
            self.kit, interval=self.config.tick_interval_seconds, lease=self.lease_for(STAFF_LOG_WORK)
        )
        await self.staff_log.prime()
        await self.live_runs.prime()
        self.ticker = Ticker(
            self.services.runner, interval=self.config.tick_interval_seconds, before=self.wait_until_ready
        )
        self.ticker.start()
        for loop in self.background_loops():
            loop.start()

    def background_loops(self) -> list[LeasedLoop]:
        """Every loop that follows the database, the staff log's once it is built."""
        loops: list[LeasedLoop] = [
            self.mirror,
            self.live_runs,
            self.signup_messages,
            self.signup_imports,
            self.event_threads,
            self.attendee_roles,
            self.attendee_reminders,
        ]
        return loops if self.staff_log is None else [self.staff_log, *loops]

    async def stop_work(self) -> None:
        """Stop the loops, each once its pass let go of what it held, and hand the work they
        held to the other process, if any, which takes it over at its next pass."""
        if self.ticker is not None:
            await self.ticker.stop()
        for loop in self.background_loops():
            await loop.stop()

    async def close(self) -> None:
        await self.stop_work()
        # Runs started here and still being driven finish their step (or give the run back).
        await self.services.runner.aclose()
        if self.ticker is not None:
            await self.ticker.aclose()
        await super().close()


def create_bot(
    config: Config,
    engine: AsyncEngine,
    *,
    clock: Clock | None = None,
    runner_settings: RunnerSettings | None = None,
    owner: str | None = None,
) -> EventBot:
    """The bot for ``config`` (already validated) on ``engine`` (owned by the caller)."""
    return EventBot(config, engine, clock=clock, runner_settings=runner_settings, owner=owner)


class CommandPublisher(discord.Client):
    """``python -m bot sync``'s whole client: a login and the ``/event`` and ``/events`` commands
    as Discord is told them. It opens no gateway connection and no database, and never receives an
    interaction, so none of the commands' callbacks can run here."""

    def __init__(self) -> None:
        quiet_voice()
        # It never opens the gateway, so intents ask for nothing; the guilds one only keeps
        # discord.py from warning, at every sync, that state may go missing without it.
        super().__init__(intents=discord.Intents(guilds=True))
        self.tree: app_commands.CommandTree[CommandPublisher] = app_commands.CommandTree(self)
        self.tree.add_command(event_commands())
        self.tree.add_command(players_commands())
        self.tree.add_command(reminder_commands())


def event_commands() -> app_commands.Group:
    """``/event`` as Discord is told it, built without a bot to serve it (with the authoring and
    ``/event signups`` commands added). discord.py binds a cog's commands in ``Cog.__new__``, so the
    group exists without running ``EventCog.__init__``: sync calls none of them."""
    group = EventCog.__new__(EventCog).app_command
    assert group is not None, "a GroupCog always has its group"
    return add_attendance_commands(add_authoring_commands(add_signup_commands(group)))


class HasTree(Protocol):
    @property
    def tree(self) -> app_commands.CommandTree[Any]: ...


async def sync_tree(client: HasTree, guild_id: int | None = None) -> list[app_commands.AppCommand]:
    """Publish the command tree to one guild (at once) or globally (Discord may take an hour)."""
    if guild_id is None:
        return await client.tree.sync()
    guild = discord.Object(guild_id)
    client.tree.copy_global_to(guild=guild)
    return await client.tree.sync(guild=guild)


def database_shown(engine: AsyncEngine) -> str:
    return masked_url(str(engine.url))
