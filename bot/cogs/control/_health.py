"""``/event health``: the runner's health view (``runner.views.health``) with what only the bot
knows added: its own Discord latency, and the bot's permissions in every channel the config
names, checked by the same ``check_channel`` the ``/event start`` preflight uses (the channel
resolves and is in this server; the bot may view it, send and embed there), plus Manage Events
when published events are listed in the Events tab (the mirror's own check), and for published
events with a thread step or an ``attendee_role``, the thread permissions where the thread goes
and Manage Roles with the role below the bot's (``bot.cogs.control._preflight``'s checks), and
the action plugins this process refused when it built its registry (``actions.plugin_problems``).

Read Message History is not asked for: the bot never reads a channel's history, it only edits
the messages it posted, by their ids.

A channel the bot cannot use is a problem like any other: the answer's title counts it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

import discord

from actions import limits, plugin_problems
from bot.clock import as_utc
from bot.cogs.control._preflight import attendee_role_problems, thread_problems
from bot.cogs.events_tab._loop import listing_status_line
from bot.protocols import Served
from bot.rendering import clip, fit, fit_list, timestamp
from runner.views import HealthReport, health, published_definitions
from runner.views.health import HeldStep, ProcessHealth, RunHealth, duration_text, worst_first

HEALTHY_COLOUR = 0x2ECC71
WARNING_COLOUR = 0xF1C40F
PROBLEM_COLOUR = 0xE74C3C
# The problems and warnings get at most this much; the lists share what is left of the 6,000.
DESCRIPTION_ROOM = 1500
# Kept back from the lists' share, so that rounding never pushes the embed over.
LIST_ROOM_SPARE = 50


@dataclass(frozen=True)
class ChannelCheck:
    alias: str
    # What the config uses it for: "GM cues", "staff log", "sandbox", or "announcements".
    use: str
    problems: list[str]


@dataclass(frozen=True)
class BotHealth:
    report: HealthReport
    owner: str
    # The gateway's heartbeat latency in seconds (None while not connected).
    discord_latency: float | None
    channels: list[ChannelCheck]
    # Manage Events missing for mirrored events (None: nothing to say).
    listing: str | None
    # What published events' threads and attendee roles would hit: "event key: problem".
    events: list[str] = dataclasses.field(default_factory=list)
    # Discord's refusals in the last 10 minutes, when there is anything to say (``bot.invalid_requests``),
    # and whether the background loops are paused for them.
    refusals: str | None = None
    paused: bool = False
    # Why each refused action plugin registered nothing (``actions.plugin_problems``).
    plugins: list[str] = dataclasses.field(default_factory=list)

    @property
    def channel_problems(self) -> list[str]:
        return [f"#{c.alias} ({c.use}): {p}" for c in self.channels for p in c.problems]

    @property
    def problems(self) -> list[str]:
        found = list(self.report.problems) + self.channel_problems
        if self.listing:
            found.append(self.listing.removeprefix("⚠️ ").rstrip("."))
        if self.refusals and self.paused:
            found.append(self.refusals)
        return found + self.events + self.plugins

    @property
    def warnings(self) -> list[str]:
        refusals = [self.refusals] if self.refusals and not self.paused else []
        return list(self.report.warnings) + refusals


def _use(config_gm: str | None, config_staff: str | None, config_sandbox: str | None, alias: str) -> str:
    uses = []
    if alias == config_gm:
        uses.append("GM cues")
    if alias == config_staff:
        uses.append("staff log")
    if alias == config_sandbox:
        uses.append("sandbox")
    return ", ".join(uses) or "announcements"


async def check_channels(client: discord.Client, bot: Served) -> list[ChannelCheck]:
    """Every channel alias in the config, checked as preflight checks a step's channel. A voice
    or stage channel is only ever an Events-tab location, so nothing is posted there to check."""
    config = bot.config
    checks = []
    for alias, channel_id in config.channels.items():
        channel = client.get_channel(channel_id)
        if isinstance(channel, discord.VoiceChannel | discord.StageChannel):
            continue
        use = _use(config.gm_channel, config.staff_log_channel, config.sandbox_channel, alias)
        checks.append(ChannelCheck(alias, use, await bot.services.delivery.check_channel(alias)))
    return checks


async def bot_health(client: discord.Client, bot: Served) -> BotHealth:
    services = bot.services
    report = await health(
        services.engine, services.clock.now(), interval_seconds=bot.config.tick_interval_seconds
    )
    latency = client.latency if math.isfinite(client.latency) else None
    listing = await listing_status_line(bot.mirror) if report.database.reachable else None
    events = await check_events(bot) if report.database.reachable and report.database.schema_current else []
    channels = await check_channels(client, bot)
    guard = bot.invalid_requests
    return BotHealth(
        report,
        services.runner.owner,
        latency,
        channels,
        listing,
        events,
        refusals=guard.summary(),
        paused=guard.backing_off,
        plugins=plugin_problems(services.registry),
    )


async def check_events(bot: Served) -> list[str]:
    """The published events' threads and attendee roles, checked as a start's preflight checks
    them: the thread permissions where their announcements go, Manage Roles and a role below
    the bot's."""
    services = bot.services
    found = []
    for definition in await published_definitions(services.engine, services.versions):
        problems = await thread_problems(services.delivery, definition)
        problems += attendee_role_problems(services.delivery, definition)
        found += [f"{definition.key}: {p.message}" for p in problems]
    return found


# ── The embed ────────────────────────────────────────────────────────────────


def _ids(ids: Sequence[int]) -> str:
    return fit_list("", [f"`{i}`" for i in ids], 300)


def _held(runs: Sequence[int], steps: Sequence[HeldStep]) -> str:
    parts = []
    if runs:
        parts.append(f"runs {_ids(runs)}")
    if steps:
        parts.append(f"steps {_ids([s.step_id for s in steps])}")
    return "holds " + "; ".join(parts) if parts else "holds nothing"


def _process_line(process: ProcessHealth, own: str) -> str:
    name = f"`{clip(process.owner, 64)}`" + (" (this process)" if process.owner == own else "")
    if not process.alive:
        return (
            f"🔴 {name} — not seen since {timestamp(process.last_seen)}; {_held(process.runs, process.steps)}"
        )
    icon = "🟠" if process.lagging else "🟢"
    timing = (
        f"tick lag {duration_text(process.tick_lag_seconds)}, longest tick {duration_text(process.tick_seconds)}"
        if process.tick_lag_seconds is not None
        else "no tick yet"
    )
    return (
        f"{icon} {name} — seen {timestamp(process.last_seen)}, {timing}; {_held(process.runs, process.steps)}"
    )


def _run_line(run: RunHealth, now: dt.datetime, *, overdue: bool = False) -> str:
    scope = f" ({clip(run.scope, 40)})" if run.scope else ""
    line = f"`{run.id}` {clip(run.title, 60)}{scope} — {run.status}, {run.health}"
    if overdue and run.wake_at is not None:
        line += f", due {duration_text((now - run.wake_at).total_seconds())} ago"
    if run.last_error:
        line += f"\n  ↳ {clip(' '.join(run.last_error.split()), 160)}"
    return line


def _lines(lines: Sequence[str], size: int, total: int | None = None, empty: str = "None.") -> str:
    """Lines within ``size``; those that do not fit are counted, and so are those the view did
    not list at all (it lists the first 50 of a kind)."""
    if not lines:
        return empty
    tail = f"\n({total} in all)" if total is not None and total > len(lines) else ""
    return fit_list("", lines, size, sep="\n", tail=tail, item_max=min(400, size // 2))


@dataclass(frozen=True)
class _ListField:
    name: str
    lines: list[str]
    total: int | None = None
    empty: str = "None."


def health_embed(found: BotHealth) -> discord.Embed:
    """The whole answer within Discord's limits: problems and warnings first, then the database,
    Discord, the processes, the channels and the runs. The room left after the short parts is
    shared out between the lists, so each keeps its first lines and counts the rest rather than
    the longest being cut mid-line."""
    report = found.report
    problems, warnings = found.problems, found.warnings
    if problems:
        title, colour = (
            f"❌ Health: {len(problems)} problem{'s' if len(problems) != 1 else ''}",
            PROBLEM_COLOUR,
        )
    elif warnings:
        title, colour = "⚠️ Health: healthy, with warnings", WARNING_COLOUR
    else:
        title, colour = "✅ Health: healthy", HEALTHY_COLOUR
    said = [f"❌ {p}" for p in problems] + [f"⚠️ {w}" for w in warnings]
    description = (
        fit_list("", said, DESCRIPTION_ROOM, sep="\n", item_max=500) if said else "Nothing is wrong."
    )
    # Discord shows the moment of the check in each reader's own time zone.
    embed = discord.Embed(
        title=title, description=description, colour=colour, timestamp=as_utc(report.checked_at)
    )

    database = report.database
    if database.reachable:
        latency = f"{database.latency_ms:.1f} ms a query" if database.latency_ms is not None else "?"
        schema = f"schema {database.schema or 'none'}" + (
            "" if database.schema_current else f" (needs {database.head})"
        )
        embed.add_field(name="Database", value=f"{database.backend} · {latency} · {schema}", inline=True)
    else:
        embed.add_field(name="Database", value="cannot be reached", inline=True)
    gateway = (
        f"{found.discord_latency * 1000:.0f} ms" if found.discord_latency is not None else "not connected"
    )
    embed.add_field(name="Discord", value=f"gateway latency {gateway}", inline=True)
    embed.set_footer(text=clip(f"Checked by {found.owner}", limits.EMBED_FOOTER_MAX))

    lists: list[_ListField] = []
    readable = database.reachable and database.schema_current
    if readable:
        # This process first: it is the one answering, and the one staff can restart.
        processes = sorted(worst_first(report.processes), key=lambda p: p.owner != found.owner)
        live = sum(p.alive for p in processes)
        lines = [_process_line(p, found.owner) for p in processes]
        lists.append(
            _ListField(
                f"Processes ({live} alive of {len(processes)})", lines, empty="None has written a heartbeat."
            )
        )
        if report.other_holders:
            lines = [f"`{clip(h.owner, 64)}` {_held(h.runs, h.steps)}" for h in report.other_holders]
            lists.append(_ListField("Leases held without a heartbeat", lines))
    checked = len(found.channels)
    bad = sum(bool(c.problems) for c in found.channels)
    if bad:
        lines = [f"❌ {clip(p, 300)}" for p in found.channel_problems]
    else:
        lines = [f"✅ {checked} channels: the bot may view, send and embed in each."] if checked else []
    lists.append(
        _ListField(
            f"Channels ({checked - bad} of {checked} fine)", lines, empty="No channels are configured."
        )
    )
    if readable:
        now = report.checked_at
        lines = [_run_line(r, now) for r in report.unwell]
        lists.append(
            _ListField(f"Runs stalled or degraded ({report.unwell_total})", lines, report.unwell_total)
        )
        lines = [_run_line(r, now, overdue=True) for r in report.overdue]
        lists.append(
            _ListField(f"Runs due but not picked up ({report.overdue_total})", lines, report.overdue_total)
        )
    room = limits.EMBED_TOTAL_MAX - len(embed) - sum(len(f.name) for f in lists) - LIST_ROOM_SPARE
    size = min(limits.EMBED_FIELD_VALUE_MAX, room // len(lists))
    for field in lists:
        embed.add_field(
            name=field.name, value=_lines(field.lines, size, field.total, field.empty), inline=False
        )
    return fit(embed)
