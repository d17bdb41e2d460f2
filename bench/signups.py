"""Issue 20's load: 50 members click a sign-up button within 2 s. Each must be answered within
Discord's 3 s, and the sign-up message's list edited at most once per 5 s. Issue 28's burst:
500 members within 1 s, answered with p99 under 1 s.

The real bot (``bot.app.create_bot``) runs in simcord, the offline Discord the tests use, on a
fresh migrated database of the backend. simcord's public ``click`` waits for the bot to settle
after each press, so 50 of them would be answered one after the other; the issue's load is 50
presses arriving while the earlier ones are still being answered. So the bench hands simcord's
gateway the 50 ``INTERACTION_CREATE`` payloads itself (what ``MemberActor.click`` sends, built
by simcord's own ``interactions.base_payload``), one every 40 ms of wall time, and settles once.

Timing, on two clocks:

* **Answers, wall time.** Every REST request the bot makes is stamped with ``perf_counter`` as
  simcord's fake HTTP receives it. A press's ack is its ``/interactions/{id}/{token}/callback``
  (the deferred, ephemeral answer), its answer the followup on ``/webhooks/{app}/{token}``;
  both are timed from the moment its payload was handed to the gateway. Discord's deadline
  applies to the ack (3 s); the followup has 15 minutes, but the member waits for it, so it is
  held to the same 3 s. The baseline is one press alone on the same bot, measured first.
* **Edits, simulated time.** The sign-up loop coalesces by the event loop's clock, which in
  simcord is the simulated one (it stands still while the 50 presses are answered, then the
  bench moves it on a second at a time). An edit's time is the simulated instant it reached
  simcord; the promise is 5 s between two edits of one message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import discord
from discord.ext import commands

from actions import validation_registry
from bench.backends import Backend, fresh_engine
from bench.results import Options, Result, median, percentile
from bot.app import EventBot, create_bot, sync_tree
from bot.cogs.signups._messages import EDIT_GAP
from runner import catalog, definitions
from runner.history import Actor
from wiring.config import Config

if TYPE_CHECKING:
    # simcord comes with the ``test`` extra; imported where it is used, so ``python -m bench``
    # without it still runs every other benchmark (this one reports the ImportError).
    import simcord

CLICKS = 50
SPREAD = 2.0  # seconds of wall time the 50 presses arrive over
DEADLINE = 3.0  # Discord's: an interaction not acknowledged by then fails in the member's client
SEATS = 20  # so 30 of the 50 land on the waiting list: both answers are measured
TICK = 5.0
SETTLE_TIMEOUT = 120.0

# Issue 28's burst: 500 members press within a second, each answered (followup) within 1 s at p99.
BURST, BURST_SPREAD, BURST_TARGET = 500, 1.0, 1.0
BURST_ROW = "sign-ups: 500 presses in 1 s, answer (followup) p99"
ACK = "sign-ups: 50 presses in 2 s, ack (deferred) slowest"
ANSWER = "sign-ups: 50 presses in 2 s, answer (followup) slowest"
EDITS = "sign-ups: list edits of the 50 presses, shortest gap"


@dataclass
class Stamped:
    """When each REST request reached simcord: wall time and simulated time."""

    wall: float
    simulated: float
    method: str
    path: str


class StampedLog(list[Any]):
    """simcord's request log, stamping each request as it is appended."""

    def __init__(self, env: simcord.Env, existing: list[Any]) -> None:
        super().__init__(existing)
        self.env = env
        self.stamps: list[Stamped] = []

    def append(self, entry: Any) -> None:
        self.stamps.append(
            Stamped(time.perf_counter(), self.env.backend.clock.elapsed, entry.method, entry.path)
        )
        super().append(entry)


@dataclass
class Sample:
    single_ack: float
    single_answer: float
    acks: list[float] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)
    edits_at: list[float] = field(default_factory=list)
    confirmed: int = 0
    waitlisted: int = 0

    @property
    def shortest_gap(self) -> float:
        gaps = [b - a for a, b in zip(self.edits_at, self.edits_at[1:], strict=False)]
        return min(gaps) if gaps else math.inf


def _config(guild: simcord.GuildHandle, channels: dict[str, simcord.ChannelHandle]) -> Config:
    return Config.model_validate(
        {
            "database_url": "sqlite+aiosqlite:///unused.sqlite3",
            "guild_id": guild.id,
            "channels": {alias: c.id for alias, c in channels.items()},
            "roles": {},
            "staff_log_channel": "staff_log",
            "tick_interval_seconds": TICK,
            # simcord freezes the clock while the bot settles: a hold would wait on it for ever.
            "hold_waits_in_process": False,
        }
    )


def _spec() -> dict[str, Any]:
    return {
        "key": "raid-night",
        "title": "Raid Night",
        "phases": [
            {"key": "main", "label": "Main", "steps": [{"action": "core.wait", "params": {"duration": "1m"}}]}
        ],
        "signup": {"channel": "announcements", "options": {"going": SEATS}, "closes": "1h"},
    }


def _press_payload(env: simcord.Env, member: simcord.MemberActor, message: Any, custom_id: str) -> Any:
    """Hand the gateway the press ``member.click`` would, without waiting for the bot to settle;
    answers simcord's interaction record (its id is in the ack's and followup's paths)."""
    from simcord import interactions as simcord_interactions
    from simcord.backend import serializers
    from simcord.enums import ComponentType, InteractionType

    backend = env.backend
    stored = backend.get_message(message.channel.id, message.id)
    record, payload = simcord_interactions.base_payload(
        backend,
        type=InteractionType.MESSAGE_COMPONENT,
        channel_id=stored.channel_id,
        guild_id=member.guild.id,
        user_id=member.id,
        data={"custom_id": custom_id, "component_type": ComponentType.BUTTON},
    )
    payload["message"] = dict(serializers.message_payload(backend, stored))
    record.source_message_id = stored.id
    backend.emit("INTERACTION_CREATE", payload)
    return record


def _answer_times(log: StampedLog, pressed: dict[int, tuple[float, str]]) -> tuple[list[float], list[float]]:
    acks, answers = [], []
    for interaction_id, (at, token) in pressed.items():
        ack = next(s for s in log.stamps if s.path == f"/interactions/{interaction_id}/{token}/callback")
        answer = next(s for s in log.stamps if s.method == "POST" and s.path.endswith(f"/{token}"))
        acks.append(ack.wall - at)
        answers.append(answer.wall - at)
    return acks, answers


async def _measure(backend: Backend, spread: float = SPREAD, clicks: int = CLICKS) -> Sample:
    import simcord

    async with fresh_engine(backend) as engine:
        placeholder = commands.Bot(command_prefix=commands.when_mentioned, intents=discord.Intents.default())
        env = simcord.Env(placeholder, settle_timeout=SETTLE_TIMEOUT)
        await env.start()
        bot: EventBot | None = None
        try:
            guild = env.create_guild("Harbour Town")
            channels = {
                name.replace("-", "_"): guild.create_text_channel(name)
                for name in ("announcements", "staff-log")
            }
            members = [guild.add_member(env.create_user(f"raider{n}")) for n in range(clicks + 1)]
            with env.time_context():
                now = env.now().replace(tzinfo=None)
                definition = definitions.validate(_spec(), validation_registry())
                await catalog.publish(engine, definition, now, actor=Actor(None, "bench"))
                async with engine.begin() as conn:
                    current = await catalog.current(conn, "raid-night", catalog.VersionCache())
                    run_id = await catalog.create_run(
                        conn, current, "", now + dt.timedelta(hours=3), now, actor=Actor(None, "bench")
                    )
                assert run_id is not None
                bot = create_bot(_config(guild, channels), engine)
                await env.restart_bot(bot)
                await sync_tree(bot, guild.id)
            await env.advance_time(2 * TICK)  # the sign-up message is posted
            message = channels["announcements"].last_message
            assert message is not None and message.embeds, "the sign-up message was not posted"
            log = StampedLog(env, env.backend.http_requests)
            env.backend.http_requests = log
            custom_id = f"signup:{run_id}:going"

            # The baseline: one press alone.
            at = time.perf_counter()
            record = _press_payload(env, members[0], message, custom_id)
            await env.settle(timeout=SETTLE_TIMEOUT)
            [single_ack], [single_answer] = _answer_times(log, {record.id: (at, record.token)})
            await env.advance_time(2 * EDIT_GAP)  # its list edit goes out, and the gap passes
            message_path = f"/channels/{message.channel.id}/messages/{message.id}"
            edits_before = sum(1 for s in log.stamps if s.method == "PATCH" and s.path == message_path)

            # The load: 50 presses, one every 40 ms of wall time, answered while more arrive.
            pressed: dict[int, tuple[float, str]] = {}
            started = time.perf_counter()
            for n, member in enumerate(members[1:]):
                await asyncio.sleep(max(0.0, started + n * spread / clicks - time.perf_counter()))
                at = time.perf_counter()
                record = _press_payload(env, member, message, custom_id)
                pressed[record.id] = (at, record.token)
            await env.settle(timeout=SETTLE_TIMEOUT)
            acks, answers = _answer_times(log, pressed)
            for _ in range(int(4 * EDIT_GAP)):
                await env.advance_time(1)
            edits_at = [s.simulated for s in log.stamps if s.method == "PATCH" and s.path == message_path][
                edits_before:
            ]
            counts = await _counts(engine, run_id)
            return Sample(single_ack, single_answer, acks, answers, edits_at, *counts)
        finally:
            if bot is not None:
                await bot.stop_work()
            await env.shutdown()


async def _counts(engine: Any, run_id: int) -> tuple[int, int]:
    from runner import signups

    listed = await signups.listing(engine, run_id)
    assert listed is not None
    return len(listed.confirmed), len(listed.waitlisted)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


async def run(backend: Backend, options: Options) -> list[Result]:
    repeats = 1 if options.quick else min(options.repeats, 3)
    samples = [await _measure(backend) for _ in range(repeats)]
    # The median repeat by its slowest answer decides; every repeat is in the details.
    chosen = sorted(samples, key=lambda s: max(s.answers))[len(samples) // 2]
    details = [
        f"{CLICKS} presses over {SPREAD:.0f} s of wall time on one option of {SEATS} seats; "
        f"repeats: {repeats} (the median repeat by slowest answer is shown)"
    ]
    for n, s in enumerate(samples, 1):
        details.append(
            f"repeat {n}: ack p50/p95/max {_ms(median(s.acks))}/{_ms(percentile(s.acks, 95))}/{_ms(max(s.acks))}, "
            f"answer p50/p95/max {_ms(median(s.answers))}/{_ms(percentile(s.answers, 95))}/{_ms(max(s.answers))}; "
            f"one press alone: ack {_ms(s.single_ack)}, answer {_ms(s.single_answer)}; "
            f"load/alone (p95 answer) {percentile(s.answers, 95) / s.single_answer:.1f}x; "
            f"list edits at simulated +s {[round(t - s.edits_at[0], 1) for t in s.edits_at]}; "
            f"seats {s.confirmed} confirmed, {s.waitlisted} waiting"
        )
    # Worse than the issue asks, for the record: the 50 handed over in one go.
    at_once = await _measure(backend, spread=0.0)
    details.append(
        f"all {CLICKS} at once (not a row): ack p95/max {_ms(percentile(at_once.acks, 95))}/{_ms(max(at_once.acks))}, "
        f"answer p95/max {_ms(percentile(at_once.answers, 95))}/{_ms(max(at_once.answers))}; "
        f"list edits at simulated +s {[round(t - at_once.edits_at[0], 1) for t in at_once.edits_at]}"
    )
    right = all(s.confirmed == SEATS and s.waitlisted == CLICKS + 1 - SEATS for s in [*samples, at_once])
    if not right:
        details.append("MISS: the seats did not go as the capacity says")

    def answered_row(name: str, times: list[float], alone: float) -> Result:
        slowest = max(times)
        return Result(
            name,
            backend.name,
            f"{_ms(slowest)} (p95 {_ms(percentile(times, 95))})",
            f"3 s deadline; 1 press alone {_ms(alone)}",
            slowest / DEADLINE,
            "<= 1.0x of 3 s",
            slowest <= DEADLINE and right,
            details if name == ACK else [],
        )

    bursts = [await _measure(backend, spread=BURST_SPREAD, clicks=BURST) for _ in range(repeats)]
    burst = sorted(bursts, key=lambda s: percentile(s.answers, 99))[len(bursts) // 2]
    burst_right = all(s.confirmed == SEATS and s.waitlisted == BURST + 1 - SEATS for s in bursts)
    burst_p99 = percentile(burst.answers, 99)
    burst_details = [
        f"repeat {n}: answer p50/p99/max {_ms(median(s.answers))}/{_ms(percentile(s.answers, 99))}/{_ms(max(s.answers))}, "
        f"ack p99 {_ms(percentile(s.acks, 99))}; one press alone: answer {_ms(s.single_answer)}; "
        f"seats {s.confirmed} confirmed, {s.waitlisted} waiting"
        for n, s in enumerate(bursts, 1)
    ]
    gap = chosen.shortest_gap
    edits = len(chosen.edits_at)
    return [
        answered_row(ACK, chosen.acks, chosen.single_ack),
        answered_row(ANSWER, chosen.answers, chosen.single_answer),
        Result(
            BURST_ROW,
            backend.name,
            f"{_ms(burst_p99)} (max {_ms(max(burst.answers))})",
            f"1 s target; 1 press alone {_ms(burst.single_answer)}",
            burst_p99 / BURST_TARGET,
            "p99 <= 1.0x of 1 s",
            burst_p99 <= BURST_TARGET and burst_right,
            burst_details
            if burst_right
            else [*burst_details, "MISS: the seats did not go as the capacity says"],
        ),
        Result(
            EDITS,
            backend.name,
            f"{edits} edits, gap {'-' if math.isinf(gap) else f'{gap:.1f} s'}",
            f"{EDIT_GAP:.0f} s promise",
            None if math.isinf(gap) else gap / EDIT_GAP,
            ">= 1.0x of 5 s",
            edits >= 1 and gap >= EDIT_GAP,
        ),
    ]
