"""Two bot processes, active-active, on one database and one bot token.

How two processes are simulated: simcord's ``Env`` is "a running test environment around a
single bot", and only one runs per event loop, so the choice is the same interaction delivered
to two bots' handlers. The first bot is the ``Env``'s own; the second (``Pair.join``) is a
second real ``EventBot`` from ``create_bot``, with its own owner id, attached to the same
simulated Discord the way simcord attaches its own: its HTTP client and webhook adapter are
simcord's fakes over the same backend, so every request it makes is in ``Env.http_requests``
(and checked against Discord's OpenAPI like the first bot's); and it subscribes to the same
gateway, so every event, every interaction included, reaches both bots' real discord.py parsers
from the same payload, as Discord delivers it to two sessions. Which bot hears an interaction
first is drawn at random in the trials. Both bots' tasks run in the ``Env``'s scope, so
``settle`` and ``advance_time`` wait for both.

What this does not cover: the two "processes" share one event loop and one SQLAlchemy engine
(one SQLite file, one connection: two engines on one file wait for each other's write lock with
real sleeps, which simcord's frozen clock never ends), so the claims' race is decided in the
database, by which insert comes first, but never by two inserts truly at once; the statements'
behaviour under concurrent connections, on MariaDB too, is in ``tests/bridge/test_exclusive.py``.
The two deliveries arrive with no delay between them, and a process "dies" by losing its
gateway feed and its loops (``Pair.kill``), not by a signal mid-statement.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from simcord import _dpy_internals
from simcord.backend import serializers
from simcord.gateway import ShardRouter
from simcord.http.client import FakeHTTPClient, FakeWebhookAdapter
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.app import EventBot, create_bot
from bot.claims import claim_key
from runner.schema import external_claims, work_leases
from tests.bot.conftest import Sim
from tests.support.definitions import cue, event, phase
from wiring.config import Config


@dataclass
class Pair:
    """The two processes: ``sim.bot`` (the Env's) and the joined ones, with their feeds."""

    sim: Sim
    engine: AsyncEngine
    feeds: dict[int, Callable[[str, Any], None]] = field(default_factory=dict)
    bots: list[EventBot] = field(default_factory=list)

    async def join(self, owner: str, config: Config | None = None) -> EventBot:
        """Start one more bot process on the same database and the same simulated Discord."""
        env = self.sim.env
        bot = create_bot(config or self.sim.config, self.engine, owner=owner)
        _dpy_internals.install_http(bot, FakeHTTPClient(env.backend, asyncio.get_running_loop()))
        _dpy_internals.set_guild_ready_timeout(bot, 0.0)
        state = _dpy_internals.get_state(bot)
        state.shard_count, state.shard_ids = 1, [0]
        router = ShardRouter(env.backend, state, bot.dispatch, 1, (0,))

        def feed(event: str, payload: Any) -> None:
            with env._bot_scope():
                router.feed(event, payload)

        env.backend.subscribers.append(feed)
        self.feeds[id(bot)] = feed
        _dpy_internals.install_websocket(bot, router.websockets[0])
        with env._bot_scope():
            await bot.login("simcord.fake.token")
            router.identify(0)
            for guild in list(env.backend.guilds.values()):
                router.gateways[0].feed("GUILD_CREATE", serializers.guild_create_payload(env.backend, guild))
        await env._settle_internal(timeout=10.0)
        assert bot.is_ready()
        self.bots.append(bot)
        return bot

    async def stop(self, bot: EventBot) -> None:
        """Stop a process cleanly (``close``: its loops stop, its leases are given back)."""
        env = self.sim.env
        with env._bot_scope():
            await bot.close()
        feed = self.feeds.pop(id(bot), None) if bot is not self.sim.bot else env._gateway_feed
        if feed in env.backend.subscribers:
            env.backend.subscribers.remove(feed)
        await env._settle_internal(timeout=10.0)

    def hears_first(self, bot: EventBot) -> None:
        """Deliver the next events to ``bot`` before the other process (Discord promises no
        order between two sessions)."""
        subscribers = self.sim.env.backend.subscribers
        feed = self.feeds[id(bot)] if bot is not self.sim.bot else self.sim.env._gateway_feed
        subscribers.remove(feed)
        subscribers.insert(0, feed)

    def kill(self, bot: EventBot) -> None:
        """The process dies: it stops hearing Discord and its loops stop, nothing is given back."""
        env = self.sim.env
        feed = self.feeds.pop(id(bot), None) if bot is not self.sim.bot else env._gateway_feed
        if feed in env.backend.subscribers:
            env.backend.subscribers.remove(feed)
        for loop in (
            bot.ticker,
            bot.staff_log,
            bot.mirror,
            bot.live_runs,
            bot.event_threads,
            bot.attendee_roles,
        ):
            if loop is not None:
                loop.loop.cancel()

    async def close(self) -> None:
        for bot in self.bots:
            if not bot.is_closed():
                with self.sim.env._bot_scope():
                    await bot.close()
        for feed in self.feeds.values():
            if feed in self.sim.env.backend.subscribers:
                self.sim.env.backend.subscribers.remove(feed)


class Timing:
    """Real (wall-clock) seconds from each interaction's delivery to its acknowledgement (the
    callback request), whichever process made it; and every request made about it."""

    def __init__(self, sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sim = sim
        self.delivered: dict[int, float] = {}
        self.acknowledged: dict[int, list[float]] = {}
        self.tokens: dict[int, str] = {}
        sim.env._register_dispatch_observer(self._observe)
        original = FakeWebhookAdapter.request

        async def timed(adapter: FakeWebhookAdapter, route: Any, *args: Any, **kwargs: Any) -> Any:
            path = str(route.url)
            if path.endswith("/callback"):
                interaction_id = int(path.split("/interactions/")[1].split("/")[0])
                self.acknowledged.setdefault(interaction_id, []).append(time.perf_counter())
            return await original(adapter, route, *args, **kwargs)

        # Every generation's adapter (each bot start makes one), whichever process answers.
        monkeypatch.setattr(FakeWebhookAdapter, "request", timed)

    def _observe(self, record: Any) -> None:
        self.delivered[record.id] = time.perf_counter()
        self.tokens[record.id] = record.token

    def ack_seconds(self, interaction_id: int) -> float:
        [acknowledged] = self.acknowledged[interaction_id]
        return acknowledged - self.delivered[interaction_id]

    def requests_about(self, interaction_id: int) -> list[Any]:
        token = self.tokens[interaction_id]
        return [r for r in self.sim.env.http_requests if token in r.path]

    def last(self) -> int:
        return max(self.delivered, key=self.delivered.__getitem__)


async def claims(sim: Sim) -> dict[str, str]:
    async with sim.engine.connect() as conn:
        rows = (await conn.execute(sa.select(external_claims))).mappings().all()
    return {r["external_id"]: r["claimed_by"] for r in rows}


async def lease_owners(sim: Sim) -> dict[str, str | None]:
    async with sim.engine.connect() as conn:
        rows = (await conn.execute(sa.select(work_leases))).mappings().all()
    return {r["name"]: r["owner"] for r in rows}


PUBLISHERS = {"start": ["moderator"], "control": ["moderator"], "cue": ["gm"], "publish": ["moderator"]}
# Seconds between two presses in the trials.
PACE = 2.0


def owner(bot: EventBot) -> str:
    return bot.services.runner.owner


async def handled_once(pair: Pair, timing: Timing, bots: tuple[EventBot, ...]) -> tuple[EventBot, float]:
    """The last interaction was acknowledged once (and every request about it made by one
    process: the one whose claim is in the database, and which dispatched it); answers that
    process and how long the acknowledgement took."""
    interaction_id = timing.last()
    about = [(r.method, r.path) for r in timing.requests_about(interaction_id)]
    assert len([path for _, path in about if path.endswith("/callback")]) == 1, about
    # What one process sends about an interaction (an answer, an edit of it) it sends once: a
    # second of anything would be the other process answering too (refused requests are logged).
    assert len(set(about)) == len(about), about
    who = (await claims(pair.sim))[claim_key(interaction_id)]
    [winner] = [b for b in bots if owner(b) == who]
    assert interaction_id in winner.interaction_gate.handled
    for other in bots:
        if other is not winner:
            # The loser's checks (the tree's, the button's) refused it: no callback ran, no request was made.
            assert interaction_id not in other.interaction_gate.handled
    return winner, timing.ack_seconds(interaction_id)


def last_answer(result: Any) -> Any:
    """A command's last message with text (commands defer, then answer in a follow-up)."""
    return [m for m in [result.response, *result.followups] if m is not None and m.content][-1]


def drill(cues: int) -> dict[str, Any]:
    """An event that is nothing but GM cues, one after another."""
    return event("drill", phase("cues", *(cue(f"Do thing {i}", label=f"thing {i}") for i in range(cues))))


def staff_lines(sim: Sim) -> list[str]:
    return [line for m in sim.staff_log.history() if not m.embeds for line in m.content.splitlines()]


def assert_each_once(lines: list[str]) -> None:
    twice = {line for line in lines if lines.count(line) > 1}
    assert not twice, f"posted twice: {sorted(twice)}"
