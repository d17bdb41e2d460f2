"""Permissions, the whole matrix (issue 4): every ``/event`` control, both GM cue buttons and the
"Start anyway" / "Rehearse anyway" buttons under a preflight, used by every kind of member,
against the real bot from ``create_bot`` in simcord's simulated Discord on a migrated SQLite
database. (Autocomplete, which shows definitions, runs and steps, gets a test of its own.)

Each case builds its own world, puts it in a state where the control *would* succeed (a run
parked on a cue for pause / cancel / skip / status / list / the cue buttons, a paused run for
resume, a run stopped at a failed step for retry, nothing in flight for start / rehearse and
their "anyway" buttons and for validate / publish, which attach the event's file with a new
title), checks that this state is
quiescent (the tick changes nothing in it), snapshots every table, and then lets one member use
one control:

* a member the config allows gets the control's ephemeral confirmation (a cue press edits the
  cue message instead) and the database moves as the control says, attributed to that member
  (reads answer with an embed and change nothing; validate says the file is valid and publish
  previews what it changes, and neither stores anything before Publish is pressed);
* anyone else gets an ephemeral refusal naming the roles that may (or, from another guild, that
  the bot serves only its own server), the bot makes no request to Discord but the interaction
  reply, and every row of every table is unchanged, byte for byte, also after a few more ticks.

The config grants ``start``, ``control``, ``rehearse`` and ``publish`` to moderator and admin,
``cue`` to GM and admin. Reading (``status``, ``list``, ``upcoming``, ``health``) needs any one capability. The actors:

* ``nobody``: a member of the bot's guild with no role;
* ``gm``, ``moderator``, ``admin``: one configured role each;
* ``owner``: the guild's owner, holding a role with Discord's Administrator permission but no
  configured role (the bot's rule: only the configured roles grant anything);
* ``other_guild``: a member of a second guild the bot is also in, holding a role there that the
  config grants *every* capability (as if someone had pasted a role id from the wrong server),
  so only the guild check stands between them and the controls. It is the home guild's admin
  user, so who they are at home does not matter either. Slash commands are synced to that guild
  too, and the buttons they press are ones the bot posted in that guild (as a misconfigured
  channel id would), so the interaction really reaches the bot from there.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import discord
import pytest
import simcord
import sqlalchemy as sa
import yaml
from discord.ext import commands
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from bot.app import EventBot, create_bot, sync_tree
from bot.cogs.control._cog import StartAnyway
from bot.cogs.control._preflight import ALL_SCOPES
from bot.cogs.cues._cog import cue_view
from bot.cogs.live._loop import EDIT_GAP
from bot.errors import BotError
from runner import catalog, definitions
from runner.history import Actor
from runner.schema import metadata
from tests.support.definitions import announce, cue, event, phase
from wiring.config import Config
from wiring.date_exceptions import DateRefused

# The run and step tables' ids in every world: one run, its first phase's announce and cue.
RUN, ANNOUNCE, CUE = 1, 1, 2
VERSION = 1  # the one published version of the event
TICK = 5.0
SETTLE_TIMEOUT = 30.0
HOME_GUILD_ID = 111_111_111_111_111_111
OTHER_GUILD_ID = 222_222_222_222_222_222
REASON = "storm over the harbour"
WRONG_GUILD = "This bot only serves its own server; nothing was done."

pytestmark = pytest.mark.simcord(settle_timeout=SETTLE_TIMEOUT)

ACTORS = ("nobody", "gm", "moderator", "admin", "owner", "other_guild")
CONTROLS = (
    "start",
    "rehearse",
    "pause",
    "resume",
    "cancel",
    "retry",
    "skip",
    "status",
    "list",
    "upcoming",
    "health",
    "validate",
    "publish",
    "create",
    "edit",
    "export",
    "signups export",
    "attendance",
    "history",
    "signups list",
    "signups add",
    "signups move",
    "signups remove",
    "signups close",
    "signups reopen",
    "skip-date",
    "move-date",
    "cue Confirm",
    "cue Skip",
    "Start anyway",
    "Rehearse anyway",
)
# The buttons among them; the rest are ``/event`` subcommands.
BUTTONS = ("cue Confirm", "cue Skip", "Start anyway", "Rehearse anyway")
# The ones that only read.
READS = ("status", "list", "upcoming", "health")
# The ones that start a run (tried with nothing in flight).
STARTS = ("start", "rehearse", "Start anyway", "Rehearse anyway")
# The ones that take a definition file (tried with nothing in flight); a preview stores nothing.
PUBLISHES = ("validate", "publish")
# The ones that open a form, or hand the YAML back (issue 28 item 1); a form stores nothing.
AUTHORING = ("create", "edit", "export")
# The ones that publish a new version with one date changed: this event has no cron schedule, so
# an allowed member reaches the command's own refusal (their success is tests/bot's).
DATES = ("skip-date", "move-date")

# What each capability lets its holders do, as the refusal words it.
WHAT = {
    "start": "start events",
    "rehearse": "rehearse events",
    "control": "pause, resume, cancel, retry or skip runs",
    "cue": "confirm or skip GM cues",
    "publish": "validate or publish event definitions",
    "signups": "add, move or remove members or close sign-ups",
    "staff": "use the event commands",
    "attendance": "take attendance",
}
CAPABILITY = {
    "start": "start",
    "rehearse": "rehearse",
    "pause": "control",
    "resume": "control",
    "cancel": "control",
    "retry": "control",
    "skip": "control",
    "status": "staff",
    "list": "staff",
    "upcoming": "staff",
    "health": "staff",
    "validate": "publish",
    "publish": "publish",
    "create": "publish",
    "edit": "publish",
    "export": "staff",
    "signups export": "staff",
    "attendance": "attendance",
    "history": "staff",
    "signups list": "staff",
    "signups add": "signups",
    "signups move": "signups",
    "signups remove": "signups",
    "signups close": "signups",
    "signups reopen": "signups",
    "skip-date": "publish",
    "move-date": "publish",
    "cue Confirm": "cue",
    "cue Skip": "cue",
    "Start anyway": "start",
    "Rehearse anyway": "rehearse",
}
PERMISSIONS = {
    "start": ["moderator", "admin", "other_guild_staff"],
    "control": ["moderator", "admin", "other_guild_staff"],
    "rehearse": ["moderator", "admin", "other_guild_staff"],
    "cue": ["gm", "admin", "other_guild_staff"],
    "publish": ["moderator", "admin", "other_guild_staff"],
    "signups": ["moderator", "admin", "other_guild_staff"],
}

# The matrix under test, written out rather than derived from the config: Y = allowed.
#                 nobody  gm   moderator admin owner other_guild
MATRIX = {
    "start": ("-", "-", "Y", "Y", "-", "-"),
    "rehearse": ("-", "-", "Y", "Y", "-", "-"),
    "pause": ("-", "-", "Y", "Y", "-", "-"),
    "resume": ("-", "-", "Y", "Y", "-", "-"),
    "cancel": ("-", "-", "Y", "Y", "-", "-"),
    "retry": ("-", "-", "Y", "Y", "-", "-"),
    "skip": ("-", "-", "Y", "Y", "-", "-"),
    "status": ("-", "Y", "Y", "Y", "-", "-"),
    "list": ("-", "Y", "Y", "Y", "-", "-"),
    "upcoming": ("-", "Y", "Y", "Y", "-", "-"),
    "health": ("-", "Y", "Y", "Y", "-", "-"),
    "validate": ("-", "-", "Y", "Y", "-", "-"),
    "publish": ("-", "-", "Y", "Y", "-", "-"),
    "create": ("-", "-", "Y", "Y", "-", "-"),
    "edit": ("-", "-", "Y", "Y", "-", "-"),
    "export": ("-", "Y", "Y", "Y", "-", "-"),
    "signups export": ("-", "Y", "Y", "Y", "-", "-"),
    "attendance": ("-", "Y", "Y", "Y", "-", "-"),
    "history": ("-", "Y", "Y", "Y", "-", "-"),
    "signups list": ("-", "Y", "Y", "Y", "-", "-"),
    "signups add": ("-", "-", "Y", "Y", "-", "-"),
    "signups move": ("-", "-", "Y", "Y", "-", "-"),
    "signups remove": ("-", "-", "Y", "Y", "-", "-"),
    "signups close": ("-", "-", "Y", "Y", "-", "-"),
    "signups reopen": ("-", "-", "Y", "Y", "-", "-"),
    "skip-date": ("-", "-", "Y", "Y", "-", "-"),
    "move-date": ("-", "-", "Y", "Y", "-", "-"),
    "cue Confirm": ("-", "Y", "-", "Y", "-", "-"),
    "cue Skip": ("-", "Y", "-", "Y", "-", "-"),
    "Start anyway": ("-", "-", "Y", "Y", "-", "-"),
    "Rehearse anyway": ("-", "-", "Y", "Y", "-", "-"),
}
assert set(MATRIX) == set(CONTROLS) and all(len(row) == len(ACTORS) for row in MATRIX.values())


def allowed(control: str, actor: str) -> bool:
    return MATRIX[control][ACTORS.index(actor)] == "Y"


def in_fast_tier(control: str, actor: str) -> bool:
    """The fast tier keeps each control's first allowed and first refused actor (both answers of
    every control, a third of the matrix, whose cases take seconds each); the rest is ``slow``."""
    answer = allowed(control, actor)
    return actor == next(other for other in ACTORS if allowed(control, other) == answer)


CASES = [
    pytest.param(
        control,
        actor,
        id=f"{control.replace(' ', '_')}-{actor}-{'allowed' if allowed(control, actor) else 'refused'}",
        marks=() if in_fast_tier(control, actor) else pytest.mark.slow,
    )
    for control in CONTROLS
    for actor in ACTORS
]


def spec() -> dict[str, Any]:
    """An announcement, a GM cue, then (next phase) a closing announcement."""
    return event(
        "raid",
        phase(
            "muster",
            announce("The raid begins!", label="Call to arms"),
            cue("Open the gates, then press Confirm.", ping_role="gm", label="Open the gates"),
        ),
        phase("finale", announce("The harbour is ours!", label="Victory")),
        title="Harbour Raid",
    )


# ── the world ─────────────────────────────────────────────────────────────


@pytest.fixture
def simcord_bot() -> discord.Client:
    """A placeholder simcord starts; the real bot needs the world's ids, so ``world`` swaps it in."""
    return commands.Bot(command_prefix=commands.when_mentioned, intents=discord.Intents.default())


@dataclass
class World:
    env: simcord.Env
    engine: AsyncEngine
    home: simcord.GuildHandle
    other: simcord.GuildHandle
    channels: dict[str, simcord.ChannelHandle]
    other_channel: simcord.ChannelHandle
    roles: dict[str, simcord.RoleHandle]
    actors: dict[str, simcord.MemberActor]
    config: Config

    @property
    def bot(self) -> EventBot:
        return self.env.bot  # type: ignore[return-value]

    def where(self, actor: str) -> simcord.ChannelHandle:
        """Where ``actor`` types commands: staff channel at home, the other guild's channel there."""
        return self.other_channel if actor == "other_guild" else self.channels["staff"]


@pytest.fixture
async def world(sqlite_engine: AsyncEngine, simcord_env: simcord.Env) -> AsyncIterator[World]:
    env = simcord_env
    owner_user = env.create_user("owner")
    home = env.create_guild("Harbour Town", id=HOME_GUILD_ID, owner=owner_user)
    channels = {
        name.replace("-", "_"): home.create_text_channel(name)
        for name in ("announcements", "gm-cues", "staff", "staff-log", "sandbox")
    }
    roles = {
        "gm": home.create_role("GM"),
        "moderator": home.create_role("Moderator"),
        "admin": home.create_role("Admin"),
    }
    server_admin = home.create_role("Server Admin", permissions=discord.Permissions(administrator=True))
    other = env.create_guild("Rival Town", id=OTHER_GUILD_ID)
    other_channel = other.create_text_channel("general")
    other_staff = other.create_role("Staff")
    admin_user = env.create_user("admin")
    actors = {
        "nobody": home.add_member(env.create_user("nobody")),
        "gm": home.add_member(env.create_user("gm"), roles=[roles["gm"]]),
        "moderator": home.add_member(env.create_user("moderator"), roles=[roles["moderator"]]),
        "admin": home.add_member(admin_user, roles=[roles["admin"]]),
        "owner": home.add_member(owner_user, roles=[server_admin]),
        # The home guild's admin, acting from the other guild with every capability there.
        "other_guild": other.add_member(admin_user, roles=[other_staff]),
    }
    config = Config.model_validate(
        {
            "database_url": "sqlite+aiosqlite:///unused.sqlite3",
            "guild_id": home.id,
            "channels": {alias: c.id for alias, c in channels.items()},
            "roles": {alias: r.id for alias, r in roles.items()} | {"other_guild_staff": other_staff.id},
            "permissions": PERMISSIONS,
            "gm_channel": "gm_cues",
            "staff_log_channel": "staff_log",
            "sandbox_channel": "sandbox",
            "tick_interval_seconds": TICK,
        }
    )
    world = World(env, sqlite_engine, home, other, channels, other_channel, roles, actors, config)
    with env.time_context():
        published = definitions.validate(spec(), validation_registry())
        await catalog.publish(sqlite_engine, published, now(env), actor=Actor(None, "test"))
        bot = create_bot(config, sqlite_engine)
        await env.restart_bot(bot)
        await sync_tree(bot, home.id)
        # As a bot synced globally would be: the commands reach the other guild too.
        await sync_tree(bot, other.id)
    yield world


def now(env: simcord.Env) -> dt.datetime:
    return env.now().replace(tzinfo=None)


# ── reading the database ──────────────────────────────────────────────────

Snapshot = dict[str, list[tuple[Any, ...]]]
# Which process handled which interaction, which holds which work, and each process's heartbeat:
# written by every interaction and renewed as time passes, whoever may do what.
BOOKKEEPING = {"event_external_claims", "event_work_leases", "runner_processes"}


async def snapshot(engine: AsyncEngine) -> Snapshot:
    """Every row of every table, as the driver returns it (JSON and datetimes as stored text)."""
    out: Snapshot = {}
    async with engine.connect() as conn:
        for table in metadata.sorted_tables:
            if table.name in BOOKKEEPING:
                continue
            key = ", ".join(column.name for column in table.primary_key.columns)
            result = await conn.exec_driver_sql(f"SELECT * FROM {table.name} ORDER BY {key}")
            out[table.name] = [tuple(row) for row in result.all()]
    return out


async def run_row(engine: AsyncEngine, run_id: int = RUN) -> Any:
    async with engine.connect() as conn:
        table = metadata.tables["event_runs"]
        return (await conn.execute(sa.select(table).where(table.c.id == run_id))).one()


async def step_row(engine: AsyncEngine, step_id: int) -> Any:
    async with engine.connect() as conn:
        table = metadata.tables["event_run_steps"]
        return (await conn.execute(sa.select(table).where(table.c.id == step_id))).one()


async def log_rows(engine: AsyncEngine) -> list[Any]:
    async with engine.connect() as conn:
        table = metadata.tables["event_run_log"]
        return list((await conn.execute(sa.select(table).order_by(table.c.id))).all())


# ── arranging the state each control acts on ──────────────────────────────


@dataclass
class Stage:
    """The state a control is tried in: the message whose button is pressed, if any."""

    message: discord.Message | None = None
    log_before: int = 0


async def start_run(world: World) -> None:
    """Start the event through the engine (not through the bot's permission layer) and let the
    bot's tick loop carry it as far as it goes, and the run's live message catch up with it (an
    edit waits out its gap after the post)."""
    with world.env.time_context():
        result = await world.bot.services.controls.start("raid", actor=Actor(None, "setup"))
    assert result.ok and result.run_id == RUN, result
    await world.env.advance_time(TICK + EDIT_GAP)


async def stage(world: World, control: str, actor: str) -> Stage:
    env, bot = world.env, world.bot
    if control in STARTS or control in PUBLISHES or control in AUTHORING or control in DATES:
        pass  # nothing in flight: a start would start run 1
    elif control == "retry":
        # Discord refuses the first announcement: the step fails and the run pauses on it.
        announcements = world.channels["announcements"]
        env.inject_error("POST", f"/channels/{announcements.id}/messages", status=403, code=50013, times=1)
        await start_run(world)
        assert (await run_row(world.engine)).status == "paused"
        assert (await step_row(world.engine, ANNOUNCE)).status == "failed"
    else:
        await start_run(world)
        assert (await run_row(world.engine)).status == "running"
        assert (await step_row(world.engine, CUE)).status == "running", "parked on the GM cue"
        if control == "resume":
            with env.time_context():
                assert (await bot.services.controls.pause(RUN, actor=Actor(None, "setup"))).ok
            # The run's live message shows the pause once its edit gap has passed.
            await env.advance_time(EDIT_GAP)
    staged = Stage()
    if control.startswith("cue "):
        staged.message = world.channels["gm_cues"].last_message
        if actor == "other_guild":
            # The bot posts the cue's live buttons in the other guild (where a wrong channel id
            # in a config would put them): a member there can press them.
            staged.message = await bot_posts(world, world.other_channel, cue_view(CUE))
    elif control.endswith(" anyway"):
        # The button under a preflight's problems. The bot shows it ephemerally to whoever ran
        # the command, so in Discord only they can press it (its check guards a member who lost
        # the role since); here the bot posts it where this actor can press it.
        view = discord.ui.View(timeout=None)
        view.add_item(
            StartAnyway("raid", VERSION, ALL_SCOPES, "r" if control.startswith("Rehearse") else "l")
        )
        staged.message = await bot_posts(world, world.where(actor), view)
    assert staged.message is not None or control not in BUTTONS
    # The state is quiescent: ticks change nothing in it, so any change below is the control's.
    before = await snapshot(world.engine)
    await env.advance_time(2 * TICK)
    assert await snapshot(world.engine) == before, "the staged state is not quiescent"
    staged.log_before = len(await log_rows(world.engine))
    return staged


async def bot_posts(world: World, where: simcord.ChannelHandle, view: discord.ui.View) -> discord.Message:
    channel = world.bot.get_channel(where.id)
    assert isinstance(channel, discord.TextChannel)
    await channel.send("Press a button", view=view)
    await world.env.settle()
    return where.last_message


async def act(world: World, control: str, actor: str, staged: Stage) -> simcord.InteractionResult:
    member, channel = world.actors[actor], world.where(actor)
    if control in BUTTONS:
        assert staged.message is not None
        return await member.click(staged.message, label=control.removeprefix("cue "))
    options: dict[str, Any] = {
        "start": {"definition": "raid"},
        "rehearse": {"definition": "raid"},
        "pause": {"run": RUN},
        "resume": {"run": RUN},
        "cancel": {"run": RUN, "reason": REASON},
        "retry": {"run": RUN},
        "skip": {"run": RUN, "step": CUE},
        "status": {"run": RUN},
        "list": {},
        "upcoming": {},
        "health": {},
        "validate": {"file": retold()},
        "publish": {"file": retold()},
        "create": {"template": "announcement"},
        "edit": {"event": "raid"},
        "export": {"event": "raid"},
        "signups export": {"run": RUN},
        "attendance": {"run": RUN},
        "history": {"member": member},
        "signups list": {"run": RUN},
        "signups add": {"run": RUN, "member": member, "option": "tank"},
        "signups move": {"run": RUN, "member": member, "option": "tank"},
        "signups remove": {"run": RUN, "member": member},
        "signups close": {"run": RUN},
        "signups reopen": {"run": RUN},
        "skip-date": {"event": "raid", "date": "2026-12-25"},
        "move-date": {"event": "raid", "date": "2026-12-25", "to": "2026-12-26 18:00"},
    }[control]
    return await member.slash(channel, f"event {control}", **options)


def retold() -> tuple[str, bytes]:
    """The event's definition with a new title, as a file attached to the command."""
    return "raid.yaml", yaml.safe_dump(spec() | {"title": "Harbour Raid, retold"}).encode()


# ── what success looks like, control by control ───────────────────────────


def answered_embed(result: simcord.InteractionResult) -> Any:
    embeds = [e for m in [result.response, *result.followups] if m is not None for e in m.embeds]
    assert embeds, "no embed"
    return embeds[-1]


def reply_text(result: simcord.InteractionResult) -> str:
    """The ephemeral answer: commands defer (thinking) and answer in a follow-up."""
    assert result.acknowledged
    messages = [m for m in [result.response, *result.followups] if m is not None and m.content]
    assert messages, "no answer"
    assert all(m.ephemeral for m in messages)
    return messages[-1].content


async def new_log(world: World, staged: Stage) -> list[Any]:
    return (await log_rows(world.engine))[staged.log_before :]


async def assert_succeeded(
    world: World, control: str, actor: str, staged: Stage, result: simcord.InteractionResult, before: Snapshot
) -> None:
    engine = world.engine
    member = world.actors[actor]
    if control in READS:
        assert result.acknowledged and result.ephemeral
        embeds = [e for m in [result.response, *result.followups] if m is not None for e in m.embeds]
        assert embeds, "a read answers with an embed"
        if control == "status":
            assert "Status: **running**" in (embeds[-1].description or "")
        assert await snapshot(engine) == before, "reading changes nothing"
        return
    if control == "history":
        assert "No marks yet." in (answered_embed(result).description or "")
        assert await snapshot(engine) == before, "a record stores nothing"
        return
    if control in ("signups export", "signups list", "attendance"):
        # The raid has no signup: an allowed member reaches the command's own refusal.
        assert "has no sign-up list" in reply_text(result)
        simcord.assert_error(world.env, BotError)
        assert await snapshot(engine) == before, "an export stores nothing"
        return
    if control.startswith("signups "):
        assert reply_text(result).startswith(f"Run {RUN} has no sign-up list")
        assert await snapshot(engine) == before, "a refused sign-up change stores nothing"
        return
    if control in DATES:
        assert "raid has no recurring (cron) schedule" in reply_text(result)
        simcord.assert_error(world.env, DateRefused)
        assert await snapshot(engine) == before, "a refused date change stores nothing"
        return
    if control in PUBLISHES:
        text = reply_text(result)
        if control == "validate":
            assert text.startswith("✅ **raid.yaml** is valid: **Harbour Raid, retold** (`raid`)")
        else:
            assert text.startswith("📝 **Harbour Raid, retold** (`raid`): version 1 → 2, from raid.yaml")
            assert "• title: 'Harbour Raid' → 'Harbour Raid, retold'" in text
        assert await snapshot(engine) == before, "checking a file, or previewing it, stores nothing"
        return
    if control in AUTHORING:
        if control == "export":
            assert reply_text(result).startswith(
                "📄 **Harbour Raid** (`raid`), version 1: its YAML is attached."
            )
            messages = [m for m in [result.response, *result.followups] if m is not None]
            assert [a.filename for m in messages for a in m.attachments] == ["raid.yaml"]
        else:
            assert result.modal is not None, "the form opens"
        assert await snapshot(engine) == before, "a form, or an export, stores nothing"
        return
    if control.startswith("cue "):
        assert result.acknowledged and not result.ephemeral, "a press edits the cue message"
        verb = control.removeprefix("cue ")
        step = await step_row(engine, CUE)
        assert step.status == ("done" if verb == "Confirm" else "skipped")
        assert (step.settled_by_id, step.settled_by_name) == (str(member.id), member.name)
        word = "✅ Confirmed" if verb == "Confirm" else "⏭️ Skipped"
        edited = world.channels["gm_cues"].last_message
        assert edited.id == staged.message.id  # type: ignore[union-attr]
        assert edited.content.startswith(f"{word} by {member.mention}")
        kind = "step.confirmed" if verb == "Confirm" else "step.skipped"
        assert any(
            r.kind == kind and (r.actor_id, r.actor_name) == (str(member.id), member.name)
            for r in await new_log(world, staged)
        )
        return
    if control.endswith(" anyway"):
        assert result.acknowledged
        assert result.response is not None and result.response.id == staged.message.id  # type: ignore[union-attr]
        assert [b["disabled"] for row in result.response.components for b in row["components"]] == [True]
        assert result.followups and result.followups[-1].ephemeral
        text = result.followups[-1].content
    else:
        text = reply_text(result)
    run = await run_row(engine)
    if control in STARTS:
        rehearsal = control.lower().startswith("rehearse")
        which = "rehearsal of " if rehearsal else ""
        assert text == f"✅ started {which}Harbour Raid as run {RUN}"
        assert (run.started_by, run.rehearsal) == (member.name, rehearsal)
        return
    expected = {
        "pause": (f"✅ run {RUN} paused", "paused", "run.status"),
        "resume": (f"✅ run {RUN} resumed", "running", "run.status"),
        "cancel": (f"✅ run {RUN} cancelled: {REASON} (1 cue message updated)", "cancelled", "run.status"),
        "retry": (f"✅ retrying step {ANNOUNCE} (Call to arms) of run {RUN}", "running", "step.requeued"),
        # Past the skipped cue the run carries on at once, to its end.
        "skip": ("✅ skipped (1 cue message updated)", "completed", "step.skipped"),
    }
    answer, status, kind = expected[control]
    assert text == answer
    assert run.status == status
    assert any(
        r.kind == kind and (r.actor_id, r.actor_name) == (str(member.id), member.name)
        for r in await new_log(world, staged)
    )
    if control == "retry":
        assert (await step_row(engine, ANNOUNCE)).status == "done", "the retried announcement went out"
    if control == "skip":
        assert (await step_row(engine, CUE)).status == "skipped"
    if control in ("cancel", "skip"):
        cue = world.channels["gm_cues"].last_message
        assert cue.content.startswith("⏹️ Cancelled" if control == "cancel" else "⏭️ Skipped")


def assert_refused(world: World, control: str, actor: str, result: simcord.InteractionResult) -> None:
    """An ephemeral refusal that names who may (or that this is the wrong server)."""
    assert result.acknowledged and result.ephemeral
    assert result.response is not None and not result.followups
    text = result.response.content
    if actor == "other_guild":
        assert text == WRONG_GUILD
        return
    capability = CAPABILITY[control]
    assert text.startswith(f"You need one of these roles to {WHAT[capability]}: ")
    assert text.endswith(". Nothing was done.")
    aliases = (
        set().union(*PERMISSIONS.values())
        if capability == "staff"
        else set(PERMISSIONS["cue"]) | set(PERMISSIONS["signups"])
        if capability == "attendance"
        else set(PERMISSIONS[capability])
    )
    named = {int(i) for i in re.findall(r"<@&([0-9]+)>", text)}
    assert named == {world.config.roles[a] for a in aliases}


# ── the matrix ────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("control", "actor"), CASES)
async def test_permission_matrix(world: World, control: str, actor: str) -> None:
    staged = await stage(world, control, actor)
    before = await snapshot(world.engine)
    requests_before = len(world.env.http_requests)

    result = await act(world, control, actor, staged)

    if allowed(control, actor):
        await assert_succeeded(world, control, actor, staged, result, before)
        return
    assert_refused(world, control, actor, result)
    sent = world.env.http_requests[requests_before:]
    assert [(r.method, re.sub(r"[0-9]+/[^/]+/callback$", "…/callback", r.path)) for r in sent] == [
        ("POST", "/interactions/…/callback")
    ], "a refusal answers the interaction and does nothing else in Discord"
    assert sent[0].json["type"] == 4 and sent[0].json["data"]["flags"] == 64
    assert await snapshot(world.engine) == before, "a refusal changed the database"
    await world.env.advance_time(2 * TICK)
    assert await snapshot(world.engine) == before, "a refusal changed the database (seen a tick later)"


# Autocomplete is checked against the command it completes: (command, option, filled) -> who gets
# choices. Anyone else gets none (Discord allows no message there), and nothing is written.
AUTOCOMPLETE = {
    ("event start", "definition", ()): ("moderator", "admin"),
    ("event skip", "step", (("run", RUN),)): ("moderator", "admin"),
    ("event status", "run", ()): ("gm", "moderator", "admin"),
}
CHOICES = {
    "event start": [{"name": "Harbour Raid (raid)", "value": "raid"}],
    "event skip": [{"name": f"{CUE} · Open the gates — waiting for a GM", "value": CUE}],
    "event status": [{"name": f"{RUN} · Harbour Raid — running", "value": RUN}],
}


@pytest.mark.parametrize("actor", ACTORS)
async def test_autocomplete_offers_choices_only_to_who_may_use_the_command(world: World, actor: str) -> None:
    await start_run(world)
    before = await snapshot(world.engine)
    member, channel = world.actors[actor], world.where(actor)
    for (command, option, filled), allowed_actors in AUTOCOMPLETE.items():
        offered = await member.autocomplete(channel, command, option, "", **dict(filled))
        assert offered == (CHOICES[command] if actor in allowed_actors else []), command
    assert await snapshot(world.engine) == before


async def test_the_matrix_covers_every_control_and_actor(world: World) -> None:
    """The matrix is the issue's: every ``/event`` subcommand the bot has (the client offers each
    of them to a member with no role at all, so the server-side check is the only guard), and the
    owner really is the owner."""
    group = world.bot.tree.get_command("event")
    assert isinstance(group, discord.app_commands.Group)
    leaves = {
        c.qualified_name.removeprefix("event ")
        for c in group.walk_commands()
        if not isinstance(c, discord.app_commands.Group)
    }
    assert leaves == {c for c in CONTROLS if c not in BUTTONS}
    for actor in ("nobody", "other_guild"):
        offered = world.actors[actor].available_commands(world.where(actor))
        # ``/events`` is for everyone (tests/bot/players): only ``/event`` is gated.
        assert {c for c in offered if c.startswith("event ")} == {f"event {c}" for c in leaves}, actor
    guild = world.bot.get_guild(world.home.id)
    assert guild is not None and guild.owner_id == world.actors["owner"].id
    assert len(CASES) == len(CONTROLS) * len(ACTORS)
