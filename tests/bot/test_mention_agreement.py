"""The rehearsal's console and the Discord delivery give the same mention decision for the same
message: what the console says pings is what Discord, given the request the bot really sends,
would ping; what it shows inert Discord would not notify. One table of cases, both deliveries.

The Discord side is read from the request body simcord received (content and
``allowed_mentions``), applying Discord's own rule: a mention in the content notifies only when
``allowed_mentions`` lets it, so this does not take the policy's word for what it decided."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from typing import Any

import pytest

from actions.delivery import Announcement, Cue, DeliveryError
from bot.discord_delivery import DiscordDelivery
from rehearsal import Console, ConsoleDelivery
from runner.clock import ManualClock
from tests.bot.conftest import Sim, make_config

ROLE = re.compile(r"<@&([0-9]+)>")
USER = re.compile(r"<@!?([0-9]+)>")
EVERYONE = re.compile(r"@(everyone|here)\b")

# (kind, ping role, content or None, allowed_ping_roles, allow_everyone)
CASES = [
    ("announce", "players", "The raid begins!", ["players"], False),
    ("announce", "gm", "Staff only", ["players"], False),
    ("announce", None, "@everyone and @here come", ["players"], False),
    ("announce", "players", "@everyone come", ["players"], True),
    ("announce", "players", None, [], False),
    ("announce", None, "plain text", ["players"], True),
    ("announce", "gm", "<@&{players}> and <@&{moderator}>, <@{user}>", ["players", "gm"], False),
    ("cue", "gm", None, [], False),
    ("cue", "players", None, ["players"], True),
    ("cue", None, None, ["players"], True),
]


def request(kind: str, ping_role: str | None, content: str | None, n: int) -> Announcement | Cue:
    key = f"{n:02d}" + "e" * 38
    if kind == "announce":
        return Announcement("announcements", content, None, ping_role, key, 70, 100 + n)
    return Cue(None, "Boss", "Spawn the boss", ping_role, key, 70, 100 + n)


def discord_decision(sim: Sim, body: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(pinged, inert) as Discord applies ``allowed_mentions`` to the content it was sent."""
    by_id = {role.id: f"@{alias}" for alias, role in sim.roles.items()}
    allowed = body["allowed_mentions"]
    allowed_roles = set(allowed.get("roles", []))
    content = body.get("content") or ""
    pinged: set[str] = set()
    inert: set[str] = set()
    for match in ROLE.finditer(content):
        role_id = int(match.group(1))
        (pinged if role_id in allowed_roles or "roles" in allowed["parse"] else inert).add(by_id[role_id])
    for match in USER.finditer(content):
        named = int(match.group(1)) in set(allowed.get("users", []))
        (pinged if named or "users" in allowed["parse"] else inert).add(match.group(0))
    for match in EVERYONE.finditer(content):
        (pinged if "everyone" in allowed["parse"] else inert).add(match.group(0))
    return pinged, inert


async def console_decision(config: Any, message: Announcement | Cue) -> tuple[set[str], set[str]]:
    stream = io.StringIO()
    console = Console(ManualClock(dt.datetime(2026, 12, 1)), as_json=True, stream=stream)
    delivery = ConsoleDelivery(console, config)
    if isinstance(message, Announcement):
        await delivery.announce(message)
    else:
        await delivery.post_cue(message)
    console.release()
    (record,) = [json.loads(line) for line in stream.getvalue().splitlines()]
    return set(record["pings"]), set(record.get("inert_mentions", []))


@pytest.mark.parametrize(("n", "case"), list(enumerate(CASES)))
async def test_the_console_and_discord_ping_the_same(sim: Sim, n: int, case: tuple[Any, ...]) -> None:
    kind, ping_role, content, allowed, everyone = case
    if content is not None:
        content = content.format(**{a: r.id for a, r in sim.roles.items()}, user=sim.player.id)
    config = make_config(
        sim.guild,
        sim.channels,
        sim.roles,
        announce={"allowed_ping_roles": allowed, "allow_everyone": everyone},
    )
    message = request(kind, ping_role, content, n)
    live = DiscordDelivery(sim.bot, config)
    if kind == "announce":
        await live.announce(message)  # type: ignore[arg-type]
        body = sim.posts_to(sim.announcements)[-1].json
    else:
        await live.post_cue(message)  # type: ignore[arg-type]
        body = sim.posts_to(sim.gm_cues)[-1].json
    discord_pinged, discord_inert = discord_decision(sim, body)
    console_pinged, console_inert = await console_decision(config, message)

    assert console_pinged == discord_pinged
    if kind == "announce":
        assert console_inert == discord_inert


@pytest.mark.parametrize("kind", ["announce", "cue"])
async def test_both_refuse_a_ping_role_the_config_lacks(sim: Sim, kind: str) -> None:
    message = request(kind, "ghosts", "boo" if kind == "announce" else None, 50)
    stream = io.StringIO()
    console = ConsoleDelivery(
        Console(ManualClock(dt.datetime(2026, 12, 1)), as_json=True, stream=stream), sim.config
    )
    for delivery in (DiscordDelivery(sim.bot, sim.config), console):
        send = delivery.announce if kind == "announce" else delivery.post_cue
        with pytest.raises(DeliveryError) as refused:
            await send(message)  # type: ignore[arg-type]
        assert refused.value.transient is False
        assert str(refused.value).startswith("ping role 'ghosts' is not one of the role aliases in config")
    assert sim.posts_to(sim.announcements) == [] and sim.posts_to(sim.gm_cues) == []
    assert stream.getvalue() == "", "the console showed nothing either"


async def test_the_console_and_discord_ping_the_same_attendees(sim: Sim) -> None:
    """A cue's ``ping: attendees``: each attendee it names pings in both."""
    message = Cue(
        None,
        "Brief",
        "Brief them",
        "gm",
        "a" * 40,
        70,
        190,
        ping_members=(str(sim.player.id), str(sim.mod.id)),
    )
    await DiscordDelivery(sim.bot, sim.config).post_cue(message)
    discord_pinged, _ = discord_decision(sim, sim.posts_to(sim.gm_cues)[-1].json)
    console_pinged, _ = await console_decision(sim.config, message)
    assert console_pinged == discord_pinged == {"@gm", f"<@{sim.player.id}>", f"<@{sim.mod.id}>"}
