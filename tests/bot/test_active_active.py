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
behaviour under concurrent connections, on MariaDB too, is in ``tests/runner/test_exclusive.py``.
The two deliveries arrive with no delay between them, and a process "dies" by losing its
gateway feed and its loops (``Pair.kill``), not by a signal mid-statement.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from simcord import _dpy_internals
from simcord.backend import serializers
from simcord.gateway import ShardRouter
from simcord.http.client import FakeHTTPClient, FakeWebhookAdapter
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.app import EventBot, _close_on_sigterm, create_bot
from bot.claims import claim_key
from bot.work_lease import LEASE_PASSES
from runner.db import create_engine
from runner.exclusive import ExternalClaims
from runner.schema import external_claims, work_leases
from tests.bot.conftest import TICK, Sim, make_config, raid_spec
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
        for loop in (bot.ticker, bot.staff_log, bot.mirror, bot.live_runs):
            if loop is not None:
                loop.cancel()

    async def close(self) -> None:
        for bot in self.bots:
            if not bot.is_closed():
                with self.sim.env._bot_scope():
                    await bot.close()
        for feed in self.feeds.values():
            if feed in self.sim.env.backend.subscribers:
                self.sim.env.backend.subscribers.remove(feed)


@pytest.fixture
async def pair(sim: Sim) -> AsyncIterator[Pair]:
    # One engine for both processes: two engines on one SQLite file wait for each other's write
    # lock with real sleeps, which simcord's frozen clock never lets end (see the docstring).
    pair = Pair(sim, sim.engine)
    try:
        yield pair
    finally:
        await pair.close()


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


@pytest.fixture
def timing(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> Timing:
    return Timing(sim, monkeypatch)


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
            # The loser never let discord.py see it: no handler ran, so no request was made.
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


async def test_defect_a_confirm_delivered_to_both_processes_is_answered_once_never_already_confirmed(
    pair: Pair, timing: Timing
) -> None:
    """100 Confirms, each delivered to both processes: every one is acknowledged exactly once, by
    the process that claimed it and acted (the run moves one step per press), the other making
    no request about it; the acknowledgement takes a small part of Discord's 3 s."""
    sim = pair.sim
    # The trials are about the presses: no staff log or live messages to wait for.
    a = await sim.start_bot(sim.config.model_copy(update={"staff_log_channel": None}))
    b = await pair.join("process-b", sim.bot.config)
    await sim.publish(drill(100))
    await sim.mod.slash(sim.staff, "event start", definition="drill")
    winners: list[EventBot] = []
    acks: list[float] = []
    order = random.Random(13)
    for trial in range(100):
        pair.hears_first(order.choice((a, b)))
        pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
        assert pressed.acknowledged and not pressed.ephemeral, trial
        assert not pressed.followups, f"trial {trial}: {[m.content for m in pressed.followups]}"
        winner, ack = await handled_once(pair, timing, (a, b))
        winners.append(winner)
        acks.append(ack)
        # A GM's pace: the channels' budgets (5 messages per 5 s) never make a post wait.
        await sim.env.advance_time(PACE)
    run = await sim.only_run()
    assert [s.status for s in run.phases[0].steps] == ["done"] * 100
    assert run.status == "completed"
    assert a.interaction_gate.won + b.interaction_gate.won == 101, "100 presses and the start"
    assert a.interaction_gate.lost + b.interaction_gate.lost == 101
    assert max(acks) < 1.0, f"slowest acknowledgement {max(acks):.3f} s"
    assert winners.count(a) > 10 and winners.count(b) > 10, "each process won some"
    print(
        f"\ncue confirm: acknowledged in {sorted(acks)[50] * 1000:.1f} ms median, {max(acks) * 1000:.1f} ms max; "
        f"won by a {winners.count(a)}, b {winners.count(b)}"
    )


async def test_a_slash_command_delivered_to_both_processes_is_answered_once_in_100_of_100_trials(
    pair: Pair, timing: Timing
) -> None:
    """``/event pause`` and ``/event resume``, 50 each, alternating: each acknowledged once, by
    the process that acted; none is answered "already paused", and the staff log (held by one
    process) has each pause and resume once."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    acks = []
    winners = []
    order = random.Random(17)
    for trial in range(100):
        pair.hears_first(order.choice((a, b)))
        verb = "pause" if trial % 2 == 0 else "resume"
        answered = await sim.mod.slash(sim.staff, f"event {verb}", run=1)
        assert answered.acknowledged, trial
        winner, ack = await handled_once(pair, timing, (a, b))
        acks.append(ack)
        winners.append(winner)
        [reply] = answered.followups or [answered.response]
        assert "Nothing changed" not in reply.content, (trial, reply.content)
        await sim.env.advance_time(PACE)
    assert (await sim.run(1)).status == "running"
    await sim.env.advance_time(TICK * 2)
    lines = staff_lines(sim)
    assert len([line for line in lines if "paused by" in line]) == 50, lines
    assert len([line for line in lines if "resumed by" in line]) == 50, lines
    assert max(acks) < 1.0, f"slowest acknowledgement {max(acks):.3f} s"
    assert winners.count(a) > 10 and winners.count(b) > 10, "each process won some"
    print(
        f"\nslash command: acknowledged in {sorted(acks)[50] * 1000:.1f} ms median, {max(acks) * 1000:.1f} ms max"
    )


async def test_an_autocomplete_delivered_to_both_processes_is_answered_once(
    pair: Pair, timing: Timing
) -> None:
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    for _ in range(10):
        choices = await sim.mod.autocomplete(sim.staff, "event start", "definition", "ra")
        assert [c["value"] for c in choices] == ["raid"]
        await handled_once(pair, timing, (a, b))


async def test_the_staff_log_live_message_and_mirror_post_once_with_both_processes_running(
    pair: Pair,
) -> None:
    """A whole run with both processes up: the staff log's lines and the live message are
    posted once each, all by the process holding each lease; the other holds none."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(120)
    assert (await sim.run(1)).status == "completed"
    lines = staff_lines(sim)
    assert_each_once(lines)
    assert any("started by" in line for line in lines) and any("confirmed by" in line for line in lines)
    live_posts = [r for r in sim.posts_to(sim.staff_log) if (r.json or {}).get("embeds")]
    assert len(live_posts) == 1, "one live message for the run"
    holders = await lease_owners(sim)
    assert set(holders) == {"staff-log", "live-run-messages", "events-mirror"}
    assert set(holders.values()) <= {owner(a), owner(b)}
    for name, holder in holders.items():
        bot = a if holder == owner(a) else b
        other = b if bot is a else a
        assert bot.work_leases.holds(name) and not other.work_leases.holds(name), name


async def test_a_rolling_restart_loses_no_click_and_posts_nothing_twice(pair: Pair, timing: Timing) -> None:
    """Stop a, start it again, then stop b and start it again, with a GM's Confirm between each
    move: every press is answered once and moves the run one step; every staff-log line is
    posted once and none is missing."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.publish(drill(6))
    await sim.mod.slash(sim.staff, "event start", definition="drill")
    running = [a, b]
    presses = 0

    async def press() -> None:
        nonlocal presses
        pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
        assert pressed.acknowledged
        await handled_once(pair, timing, tuple(running))
        presses += 1
        steps = (await sim.only_run()).phases[0].steps
        assert [s.status for s in steps[:presses]] == ["done"] * presses

    await press()
    await pair.stop(a)
    running.remove(a)
    await press()
    a2 = await pair.join("process-a-again")
    running.append(a2)
    await press()
    await pair.stop(b)
    running.remove(b)
    await press()
    b2 = await pair.join("process-b-again")
    running.append(b2)
    await press()
    await press()
    await sim.env.advance_time(TICK * 3)
    assert (await sim.only_run()).status == "completed"
    lines = staff_lines(sim)
    assert_each_once(lines)
    confirmed = [line for line in lines if "confirmed by" in line]
    assert len(confirmed) == 6, lines
    assert any("completed" in line for line in lines), lines
    live_posts = [r for r in sim.posts_to(sim.staff_log) if (r.json or {}).get("embeds")]
    assert len(live_posts) == 1, "the live message was edited by whichever held it, never posted again"


async def test_a_lease_holder_that_dies_is_taken_over_after_its_lease_runs_out(pair: Pair) -> None:
    """The holder of the staff log dies without giving anything back: the other process posts
    the lines written since, once each, after the lease ran out."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(TICK)
    holder = a if (await lease_owners(sim))["staff-log"] == owner(a) else b
    survivor = b if holder is a else a
    pair.kill(holder)
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(LEASE_PASSES * TICK + 2 * TICK)
    assert (await lease_owners(sim))["staff-log"] == owner(survivor)
    await sim.env.advance_time(120)
    assert (await sim.run(1)).status == "completed"
    lines = staff_lines(sim)
    assert_each_once(lines)
    assert len([line for line in lines if "confirmed by" in line]) == 1, lines
    assert any("completed" in line for line in lines), lines


async def test_a_process_cut_off_from_the_database_stays_silent_and_the_other_answers(
    pair: Pair, timing: Timing, tmp_path: Path
) -> None:
    """b cannot reach the database (its claims go to a file in a directory that does not exist):
    it answers nothing, even when it hears first, and a answers every press. With both cut off,
    nobody answers at all (Discord tells the member the application did not respond)."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    unreachable = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'db.sqlite3'}")
    try:
        b.interaction_gate.claims = ExternalClaims(unreachable, owner(b))
        await sim.publish(drill(3))
        await sim.mod.slash(sim.staff, "event start", definition="drill")
        for _ in range(2):
            pair.hears_first(b)
            pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
            assert pressed.acknowledged and not pressed.followups
            winner, _ = await handled_once(pair, timing, (a, b))
            assert winner is a
            await sim.env.advance_time(PACE)
        assert b.interaction_gate.failed == 3 and b.interaction_gate.won == 0, "the start and two presses"

        a.interaction_gate.claims = ExternalClaims(unreachable, owner(a))
        pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
        assert not pressed.acknowledged
        assert timing.requests_about(timing.last()) == []
        steps = (await sim.only_run()).phases[0].steps
        assert [s.status for s in steps[:2]] == ["done", "done"]
        assert steps[2].parked, "nothing acted on the press nobody could claim"
    finally:
        await unreachable.dispose()


async def test_a_preview_button_is_handled_by_the_process_that_holds_the_preview(
    pair: Pair, timing: Timing
) -> None:
    """/event publish keeps its preview in the memory of the process that answered it; a
    Publish press heard first by the other process is still claimed by the holder, which
    publishes. With the holder gone, the other answers that the preview expired."""
    sim = pair.sim
    sim.config = make_config(sim.guild, sim.channels, sim.roles, permissions=PUBLISHERS)
    a = await sim.start_bot()
    b = await pair.join("process-b")
    for attempt in range(2):
        spec = raid_spec(title=f"Harbour Assault {attempt}")
        reply = await sim.mod.slash(
            sim.staff, "event publish", file=("raid.yaml", yaml.safe_dump(spec).encode())
        )
        maker, _ = await handled_once(pair, timing, (a, b))
        other = b if maker is a else a
        preview = last_answer(reply)
        pair.hears_first(other)
        pressed = await sim.mod.click(preview, label="Publish")
        assert pressed.acknowledged
        presser, _ = await handled_once(pair, timing, (a, b))
        assert presser is maker, "the process holding the preview claimed the press"
        shown = pressed.response
        assert shown is not None
        assert (
            shown.content == f"✅ Published **Harbour Assault {attempt}** (`raid`) as version {attempt + 2}."
        )
    spec = raid_spec(title="Harbour Assault again")
    reply = await sim.mod.slash(sim.staff, "event publish", file=("raid.yaml", yaml.safe_dump(spec).encode()))
    maker, _ = await handled_once(pair, timing, (a, b))
    pair.kill(maker)
    pressed = await sim.mod.click(last_answer(reply), label="Publish")
    answer = [m.content for m in [pressed.response, *pressed.followups] if m is not None]
    assert any("This preview expired" in text for text in answer), answer


async def test_sigterm_closes_a_process_cleanly_and_its_work_moves_at_once(pair: Pair) -> None:
    """A service manager's stop (SIGTERM) closes the bot as Ctrl-C does: the work it held is
    given back, so the other process takes it at its next pass rather than after the lease."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.env.advance_time(TICK)
    holder = a if (await lease_owners(sim))["staff-log"] == owner(a) else b
    survivor = b if holder is a else a
    loop = asyncio.get_running_loop()
    _close_on_sigterm(holder)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if holder.is_closed() and not holder.work_leases.holds("staff-log"):
                break
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
    assert holder.is_closed()
    assert set((await lease_owners(sim)).values()) <= {None, owner(survivor)}, "all given back"
    pair.kill(holder)
    await sim.env.advance_time(TICK)
    assert (await lease_owners(sim))["staff-log"] == owner(survivor), "taken at the next pass"
