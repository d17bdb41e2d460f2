#!/usr/bin/env python3
"""The pictures of the README and docs/: ``python scripts/pictures.py`` redraws every PNG in ``docs/pictures/``.

What players, GMs and staff see, as Discord draws it, from the real bot: ``create_bot`` on a
migrated SQLite database, driven through simcord (an offline Discord) and photographed by
simcord's preview in a headless Chromium. The config is ``config.example.yaml``'s aliases and
permissions on a simulated server, so the pictures show what a new server set up as
docs/setup.md says would show. Most scenes are one run of ``examples/invasion.yaml`` (one world,
``aurora``); the sign-up scene is a server of its own, where ``examples/raid-night.yaml`` (cut
to five seats) has a run booked and a few members have clicked.

These are pictures, not tests: they assert nothing (the simcord tests in ``tests/bot/`` do), they
need a browser the test suite does not, and a changed pixel is not a defect. Run it after
changing how a message looks, and commit the PNGs it writes.

Needs the ``pictures`` extra (``.venv/bin/pip install -e '.[pictures]'``) and a Chromium:
Debian's ``chromium`` package (``apt-get install -y chromium``), found at ``/usr/bin/chromium`` or
wherever ``$CHROMIUM`` says. ``--only NAME`` redraws some scenes; ``--list`` names them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.history import Actor

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "pictures"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def _into_the_venv() -> None:
    """Run under ``.venv``'s Python when started with another one (``python scripts/pictures.py``
    from a shell without the venv active), as the quick-start scripts do."""
    if importlib.util.find_spec("simcord") is not None:
        return
    if VENV_PYTHON.exists() and Path(sys.executable).resolve() != VENV_PYTHON.resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])
    sys.exit(
        "scripts/pictures.py needs eventbot's test and pictures extras: pip install -e '.[test,pictures]'"
    )


_into_the_venv()
sys.path.insert(0, str(ROOT))

import discord  # noqa: E402
import simcord  # noqa: E402
import yaml  # noqa: E402
from discord.ext import commands  # noqa: E402
from simcord.preview import _capture  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from actions import validation_registry  # noqa: E402
from bot.app import EventBot, create_bot, sync_tree  # noqa: E402
from runner import catalog  # noqa: E402
from runner.db import create_engine  # noqa: E402
from runner.definitions import EventDefinition  # noqa: E402
from runner.definitions.loading import load_file, read_file  # noqa: E402
from runner.definitions.validation import validate  # noqa: E402
from runner.migrate import upgrade  # noqa: E402
from wiring.config import Config  # noqa: E402

EVENT = ROOT / "examples" / "invasion.yaml"
SIGNUP_EVENT = ROOT / "examples" / "raid-night.yaml"
EXAMPLES = ROOT / "examples"
EXAMPLE_CONFIG = ROOT / "config.example.yaml"
SCOPE = "aurora"
BOT_NAME = "eventbot"
# A picture wide enough for an embed beside its avatar, short enough to stay a few tens of KB.
WIDTH, HEIGHT = 900, 520
# /event status lists every phase and step, and the staff log channel holds the live message
# above its lines: taller, so the whole of it is in the picture.
STATUS_HEIGHT = 760
TALL = 820
# The publish preview, without the status answers above it in the same channel.
PUBLISH_HEIGHT = 340
# The sign-up message with its three options and two rows of buttons, and the answer below it.
SIGNUP_HEIGHT = 560
# /event create's answer: the preview above the filled-in raid template's YAML.
CREATE_HEIGHT = 1240
# The bot's loop sleeps this long between ticks; simcord's clock is virtual, so it costs nothing.
TICK = 5.0
# simcord gives the bot this long (real seconds) to settle after each action; generous, because a
# browser shares the machine.
SETTLE_TIMEOUT = 30.0


def chromium_path() -> str:
    """The system Chromium: ``$CHROMIUM``, else Debian's, else one on the PATH."""
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    sys.exit(
        "no Chromium found: install Debian's (apt-get install -y chromium) or set CHROMIUM to a Chromium binary"
    )


def use_system_chromium(executable: str) -> None:
    """simcord's capture launches ``playwright.chromium.launch()`` with no arguments, which only
    finds the browser Playwright downloads itself (not available here) and cannot be told a path.
    So its ``ManagedCapture._ensure_browser`` is replaced, for this process only, by the same
    method launching the system Chromium; ``--no-sandbox`` because Chromium refuses its sandbox
    when run as root (as in a container). Everything else about the capture is simcord's own."""

    async def _ensure_browser(self: Any) -> Any:
        if self._browser is not None:
            return self._browser
        from playwright.async_api import async_playwright

        try:
            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.launch(
                executable_path=executable, args=["--no-sandbox"]
            )
        except BaseException:
            await self.close()
            raise
        return self._browser

    _capture.ManagedCapture._ensure_browser = _ensure_browser  # type: ignore[method-assign]


def draw_mentions_in_embeds() -> None:
    """simcord's preview draws a ``<@id>`` in an embed's description or field as typed; Discord's
    client draws it as a mention (one that pings nobody) of a member it knows, which in a server
    of a few people is everyone. The sign-up list is such a field, so for this process only the
    preview's policy for those two places allows mentions; it resolves them (to the member's
    name, for a viewer who may see them) as it does a message's."""
    from simcord.preview import _markdown

    for place in ("embed_description", "embed_field_value"):
        _markdown._FIELD_POLICIES[place]["mentions"] = True


# ── The simulated server ───────────────────────────────────────────────────────


@dataclass
class World:
    """The simulated server set up as ``config.example.yaml`` describes, the bot, and three
    people: a player, a game master and a member of the event team."""

    env: simcord.Env
    engine: AsyncEngine
    guild: simcord.GuildHandle
    channels: dict[str, simcord.ChannelHandle]
    # Where the event team types its commands: a channel of their own, which the bot need not know.
    staff_room: simcord.ChannelHandle
    roles: dict[str, simcord.RoleHandle]
    player: simcord.MemberActor
    gm: simcord.MemberActor
    staff: simcord.MemberActor
    config: Config

    def now(self) -> dt.datetime:
        return self.env.now().replace(tzinfo=None)

    def channel(self, alias: str) -> simcord.ChannelHandle:
        return self.channels[alias]

    async def start_bot(self) -> EventBot:
        """A new bot process, as ``python -m bot run`` would start it, swapped into the world."""
        bot = create_bot(self.config, self.engine)
        await self.env.restart_bot(bot)
        await sync_tree(bot, self.guild.id)
        return bot

    async def advance(self, seconds: float) -> None:
        await self.env.advance_time(seconds)


ROLE_COLOURS = {
    "staff": 0xE67E22,
    "event-team": 0x3498DB,
    "game-masters": 0x9B59B6,
    "quizmasters": 0x1ABC9C,
    "invasion-alerts": 0x2ECC71,
    "quiz-fans": 0xF1C40F,
}


def world_config(
    guild: simcord.GuildHandle,
    channels: dict[str, simcord.ChannelHandle],
    roles: dict[str, simcord.RoleHandle],
) -> Config:
    """``config.example.yaml`` with this world's ids in place of its made-up ones."""
    data = yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    data.update(
        database_url="sqlite+aiosqlite:///unused.sqlite3",
        guild_id=guild.id,
        channels={alias: channel.id for alias, channel in channels.items()},
        roles={alias: role.id for alias, role in roles.items()},
        tick_interval_seconds=TICK,
        # simcord freezes its clock while the bot settles: a wait held in process would never end.
        hold_waits_in_process=False,
    )
    return Config.model_validate(data)


def invasion() -> tuple[EventDefinition, str]:
    return load_file(EVENT, validation_registry()), EVENT.name


def small_raid() -> tuple[EventDefinition, str]:
    """``examples/raid-night.yaml`` with five seats (one tank, one healer, three damage dealers),
    so a few clicks fill an option and the next goes on its waiting list; without its schedule,
    so the only run is the one the scene books."""
    spec = read_file(SIGNUP_EVENT)
    spec.pop("schedule", None)
    spec["signup"].update(options={"tank": 1, "healer": 1, "dps": 3}, capacity=5)
    return validate(spec, validation_registry(), file=SIGNUP_EVENT.name), SIGNUP_EVENT.name


@contextlib.asynccontextmanager
async def world(event: tuple[EventDefinition, str]) -> AsyncIterator[World]:
    with tempfile.TemporaryDirectory(prefix="eventbot-pictures-") as tmp:
        engine = create_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'eventbot.sqlite3'}")
        await upgrade(engine)
        # A bare placeholder: the real bot needs the simulated ids in its config, which exist only
        # once the simulation runs (tests/bot/conftest.py does the same).
        placeholder = commands.Bot(command_prefix=commands.when_mentioned, intents=discord.Intents.default())
        env = simcord.Env(placeholder, settle_timeout=SETTLE_TIMEOUT)
        # simcord calls its bot "TestBot"; the pictures show the name a server would give it.
        env.backend.bot_user.name = BOT_NAME
        await env.start()
        try:
            with env.time_context():
                yield await _populate(env, engine, event)
        finally:
            await env.shutdown()
            await engine.dispose()


async def _populate(env: simcord.Env, engine: AsyncEngine, event: tuple[EventDefinition, str]) -> World:
    example = yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    guild = env.create_guild("Shadow Realms", id=100_000_000_000_000_001)
    channels = {alias: guild.create_text_channel(alias) for alias in example["channels"]}
    roles = {
        alias: guild.create_role(
            alias, color=ROLE_COLOURS.get(alias, 0), mentionable=alias.endswith("-alerts")
        )
        for alias in example["roles"]
    }
    config = world_config(guild, channels, roles)
    w = World(
        env=env,
        engine=engine,
        guild=guild,
        channels=channels,
        staff_room=guild.create_text_channel("event-team"),
        roles=roles,
        player=guild.add_member(env.create_user("robin"), roles=[roles["invasion-alerts"]], nick="Robin"),
        gm=guild.add_member(env.create_user("gwen"), roles=[roles["game-masters"]], nick="Gwen (GM)"),
        staff=guild.add_member(env.create_user("morgan"), roles=[roles["event-team"]], nick="Morgan"),
        config=config,
    )
    definition, source = event
    await catalog.publish(engine, definition, w.now(), source=source, actor=Actor(None, "pictures"))
    await w.start_bot()
    return w


# ── The scenes ──────────────────────────────────────────────────────────────────


@dataclass
class Shot:
    name: str
    what: str
    path: Path | None = None
    skipped: str | None = None


class Camera:
    """One preview session per channel and viewer; each shot a viewport PNG of the channel."""

    def __init__(self, w: World, out: Path, only: set[str] | None) -> None:
        self.w, self.out, self.only = w, out, only
        self.shots: list[Shot] = []

    def wanted(self, name: str) -> bool:
        return self.only is None or name in self.only

    async def take(
        self,
        name: str,
        what: str,
        channel: simcord.ChannelHandle,
        viewer: simcord.MemberActor,
        target: Any = None,
        *,
        height: int = HEIGHT,
    ) -> None:
        if not self.wanted(name):
            return
        path = self.out / f"{name}.png"
        async with self.w.env.preview(
            channel, viewers=[viewer], layout="channel", width=WIDTH, height=height
        ) as preview:
            if target is not None:
                await preview.show(target)
            await preview.screenshot(path, viewer=viewer, mode="viewport")
        shrink(path)
        self.shots.append(Shot(name, what, path))

    def skip(self, name: str, what: str, why: str) -> None:
        if self.wanted(name):
            self.shots.append(Shot(name, what, skipped=why))


def shrink(path: Path) -> None:
    """Re-save ``path`` with a 256-colour palette: Discord's flat dark theme loses nothing visible,
    and each picture drops to a third of its size (the README loads all of them)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(256, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def live_messages_available() -> bool:
    """The live run message (issue 12) is drawn by ``bot.cogs.live._loop`` once it exists."""
    # Looked for beside this script, not by import: an editable install would find the module in
    # another checkout than the one being drawn.
    return (ROOT / "bot" / "loops" / "live_runs.py").exists()


async def shoot(w: World, camera: Camera) -> None:
    """One run of the invasion in one world, photographed as it goes."""
    staff_room, players_chat = w.staff_room, w.channel("event-chat")
    announcements, gm_cues, staff_log = (
        w.channel("announcements"),
        w.channel("gm-cues"),
        w.channel("staff-log"),
    )

    # A player tries a staff control: refused, with the roles that may, and nothing done.
    started = await w.staff.slash(staff_room, "event start", definition="shadow-invasion", scope=SCOPE)
    run_id = _run_id(started)
    refused = await w.player.slash(players_chat, "event pause", run=run_id)
    await camera.take("refused-control", "a player trying /event pause", players_chat, w.player, refused)

    await camera.take(
        "announcement", "the opening announcement, as a player sees it", announcements, w.player
    )

    # A pause and a resume by staff, so the staff log shows who pressed what.
    await w.staff.slash(staff_room, "event pause", run=run_id)
    await w.staff.slash(staff_room, "event resume", run=run_id)

    # Through the gathering and the waves, to the cue for the Warlord.
    await w.advance(10 * 60 + TICK)
    await w.advance(15 * 60 + TICK)
    await camera.take("cue-before", "the GM cue, waiting for a GM", gm_cues, w.gm)

    status = await w.staff.slash(staff_room, "event status", run=run_id)
    await camera.take(
        "status", "/event status while the cue waits", staff_room, w.staff, status, height=STATUS_HEIGHT
    )

    if live_messages_available():
        await camera.take(
            "live-run",
            "the live run message in the staff log channel",
            staff_log,
            w.staff,
            live_message(staff_log),
            height=TALL,
        )
    else:
        camera.skip("live-run", "the live run message", "bot/cogs/live/_loop.py is not in this tree yet")

    await w.gm.click(gm_cues.last_message, label="Confirm")
    await camera.take("cue-after", "the GM cue after Confirm", gm_cues, w.gm)

    await w.advance(5 * 60 + TICK)
    await w.advance(TICK)
    await camera.take(
        "staff-log", "the staff log once the run has completed", staff_log, w.staff, height=TALL
    )

    # The event's author lengthens the waves and publishes the file from Discord: the preview.
    edited = yaml.safe_load(EVENT.read_text(encoding="utf-8"))
    battle = next(p for p in edited["phases"] if p["key"] == "battle")
    waves = next(s for s in battle["steps"] if s["action"] == "core.wait")
    waves["params"]["duration"] = "20m"
    battle["steps"].insert(
        battle["steps"].index(waves) + 1,
        {
            "label": "Warn of the second wave",
            "action": "discord.announce",
            "params": {
                "channel": "announcements",
                "content": "A second wave is forming at the gates of {scope}!",
            },
        },
    )
    upload = yaml.safe_dump(edited, sort_keys=False, allow_unicode=True).encode()
    preview = await w.staff.slash(staff_room, "event publish", file=(EVENT.name, upload))
    await camera.take(
        "publish-preview",
        "/event publish of an edited file: the preview",
        staff_room,
        w.staff,
        preview,
        height=PUBLISH_HEIGHT,
    )


async def shoot_signups(w: World, camera: Camera) -> int:
    """A run of the raid booked for this evening; four members click a seat each, then the player
    clicks the tank's, which is taken: the list with its waiting line, and the answer only the
    player sees."""
    starts = w.now().replace(hour=19, minute=0, second=0, microsecond=0)
    if starts <= w.now() + dt.timedelta(hours=2):
        starts += dt.timedelta(days=1)
    async with w.engine.begin() as conn:
        current = await catalog.current(conn, "raid-night", catalog.VersionCache())
        run_id = await catalog.create_run(conn, current, "", starts, w.now(), actor=Actor(None, "pictures"))
    assert run_id is not None
    await w.advance(TICK + 1)
    announcements = w.channel("announcements")
    message = announcements.last_message
    if message is None or not message.embeds:
        raise SystemExit("the sign-up message was not posted in #announcements")
    for name, option in (("aldric", "tank"), ("brienne", "healer"), ("cato", "dps"), ("dara", "dps")):
        raider = w.guild.add_member(w.env.create_user(name), nick=name.title())
        await raider.click(message, label=option)
    waiting = await w.player.click(message, label="tank")
    # The list is edited at most once per 5 s: after the clicks, one edit shows them all.
    await w.advance(TICK + 1)
    await camera.take(
        "signup",
        "a sign-up message with a waiting list, and the answer to a click on a full option",
        announcements,
        w.player,
        waiting,
        height=SIGNUP_HEIGHT,
    )
    return run_id


async def shoot_events(w: World, camera: Camera) -> None:
    """``/events upcoming`` as the player sees it, in the same server after the sign-up scene:
    the raid they wait for (their place on its list) and the next Friday quizzes, published
    beside it, each a timestamp in the reader's own zone."""
    quiz = EXAMPLES / "quiz-night.yaml"
    definition = load_file(quiz, validation_registry())
    await catalog.publish(w.engine, definition, w.now(), source=quiz.name, actor=Actor(None, "pictures"))
    await w.advance(TICK + 1)
    chat = w.channel("event-chat")
    shown = await w.player.slash(chat, "events upcoming")
    await camera.take(
        "events",
        "/events upcoming: the raid with the player's place, and the quizzes to come",
        chat,
        w.player,
        shown,
    )


async def shoot_create(w: World, camera: Camera) -> None:
    """/event create from the raid template: the form filled in as staff would, and the answer
    only they see: the start as a timestamp, the preview with Publish and Cancel, the YAML."""
    staff_room = w.staff_room
    shown = await w.staff.slash(staff_room, "event create", template="raid")
    preview = await w.staff.submit_modal(
        shown,
        {
            "title": "Sunken Citadel Raid",
            "when": "friday 20:00",
            "channel": "announcements",
            "capacity": "10",
        },
    )
    await camera.take(
        "create",
        "/event create from the raid template: the preview and the YAML",
        staff_room,
        w.staff,
        preview,
        height=CREATE_HEIGHT,
    )


async def shoot_staff_signups(w: World, camera: Camera, run_id: int) -> None:
    """``/event signups list`` as staff see it after the sign-up scene, once Morgan has added a
    member by hand: every seat and the waiting line in click order, and Close / Export."""
    staff_room = w.staff_room
    late = w.guild.add_member(w.env.create_user("ewan"), nick="Ewan")
    await w.staff.slash(staff_room, "event signups add", run=run_id, member=late, option="dps")
    shown = await w.staff.slash(staff_room, "event signups list", run=run_id)
    await camera.take(
        "staff-signups",
        "/event signups list: the whole list as staff see it, with Close sign-ups and Export CSV",
        staff_room,
        w.staff,
        shown,
    )


async def shoot_signups_and_events(w: World, camera: Camera) -> None:
    run_id = await shoot_signups(w, camera)
    await shoot_events(w, camera)
    await shoot_staff_signups(w, camera, run_id)


def live_message(channel: simcord.ChannelHandle) -> Any:
    """The run's live message: the bot's one message with an embed in the staff log channel."""
    found = [m for m in channel.history() if m.embeds]
    return found[-1] if found else None


def _run_id(result: Any) -> int:
    """The run id from ``/event start``'s answer ("✅ started … as run 1")."""
    text = _answer_text(result)
    digits = text.rsplit("run ", 1)[-1].strip(" .")
    if not digits.isdigit():
        raise SystemExit(f"/event start did not start a run: {text!r}")
    return int(digits)


def _answer_text(result: Any) -> str:
    """An interaction's last visible answer (every ``/event`` command defers, then follows up)."""
    if result.followups:
        return str(result.followups[-1].content)
    return str(result.response.content) if result.response is not None else ""


# ── Command line ─────────────────────────────────────────────────────────────────

INVASION_SCENES = (
    "announcement",
    "cue-before",
    "cue-after",
    "live-run",
    "status",
    "staff-log",
    "refused-control",
    "publish-preview",
)
SIGNUP_SCENES = ("signup", "events", "staff-signups")
CREATE_SCENES = ("create",)
SCENES = INVASION_SCENES + SIGNUP_SCENES + CREATE_SCENES


async def main_async(out: Path, only: set[str] | None) -> list[Shot]:
    """Each server simulated only when one of its scenes is wanted."""
    shots: list[Shot] = []
    for scenes, event, play in (
        (INVASION_SCENES, invasion, shoot),
        (SIGNUP_SCENES, small_raid, shoot_signups_and_events),
        (CREATE_SCENES, invasion, shoot_create),
    ):
        if only is not None and not only & set(scenes):
            continue
        async with world(event()) as w:
            camera = Camera(w, out, only)
            await play(w, camera)
            shots += camera.shots
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/pictures.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=OUT, help=f"where the PNGs go (default: {OUT.relative_to(ROOT)})"
    )
    parser.add_argument("--only", nargs="+", choices=SCENES, metavar="NAME", help="redraw only these scenes")
    parser.add_argument("--list", action="store_true", help="name the scenes and stop")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SCENES))
        return 0
    use_system_chromium(chromium_path())
    draw_mentions_in_embeds()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    shots = asyncio.run(main_async(args.out, set(args.only) if args.only else None))
    for shot in shots:
        if shot.skipped:
            print(f"skipped {shot.name}: {shot.what}: {shot.skipped}")
        else:
            assert shot.path is not None
            size = shot.path.stat().st_size // 1024
            print(
                f"wrote {shot.path.relative_to(ROOT) if shot.path.is_relative_to(ROOT) else shot.path} ({size} KB): {shot.what}"
            )
    print(f"{sum(1 for s in shots if not s.skipped)} pictures in {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
