"""``/event health`` through the real bot in simcord: a healthy answer, a channel the bot may not
post in named, stuck runs listed, a member without a staff role refused, and the answer within
Discord's limits however many runs and processes there are."""

from __future__ import annotations

import datetime as dt

import discord
import sqlalchemy as sa

from actions import limits
from bot.cogs.control._health import BotHealth, ChannelCheck, health_embed
from runner.clock import ManualClock
from runner.heartbeat import Heartbeat
from runner.schema import runs
from runner.views import HealthReport, health
from runner.views.health import DatabaseHealth
from tests.bot.conftest import TICK, Sim
from tests.bot.test_scheduled_events import mirrored_spec
from tests.support.world import World, phase, step


def _field(embed: discord.Embed, prefix: str) -> discord.embeds._EmbedFieldProxy:
    (found,) = [f for f in embed.fields if (f.name or "").startswith(prefix)]
    return found


async def _health(sim: Sim) -> discord.Embed:
    result = await sim.mod.slash(sim.staff, "event health")
    assert result.ephemeral
    (embed,) = result.response.embeds
    return embed


def _within_limits(embed: discord.Embed) -> None:
    assert len(embed) <= limits.EMBED_TOTAL_MAX
    assert len(embed.title or "") <= limits.EMBED_TITLE_MAX
    assert len(embed.description or "") <= limits.EMBED_DESCRIPTION_MAX
    assert len(embed.fields) <= limits.EMBED_FIELDS_MAX
    for field in embed.fields:
        assert len(field.name or "") <= limits.EMBED_FIELD_NAME_MAX
        assert 0 < len(field.value or "") <= limits.EMBED_FIELD_VALUE_MAX


async def _set_run(sim: Sim, run_id: int, **values: object) -> None:
    async with sim.engine.begin() as conn:
        await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(**values))


async def test_a_healthy_bot_says_so_with_its_own_process_and_every_channel(sim: Sim) -> None:
    await sim.env.advance_time(TICK)
    embed = await _health(sim)
    assert embed.title == "✅ Health: healthy"
    assert embed.description == "Nothing is wrong."
    owner = sim.bot.services.runner.owner
    processes = _field(embed, "Processes")
    assert processes.name == "Processes (1 alive of 1)"
    assert processes.value.startswith(f"🟢 `{owner}` (this process) — seen <t:")
    assert processes.value.endswith("; holds nothing")
    channels = _field(embed, "Channels")
    assert channels.name == "Channels (6 of 6 fine)"
    assert channels.value == "✅ 6 channels: the bot may view, send and embed in each."
    assert _field(embed, "Database").value.startswith("sqlite · ")
    assert _field(embed, "Discord").value.startswith("gateway latency ")
    assert _field(embed, "Runs stalled or degraded").value == "None."
    assert _field(embed, "Runs due but not picked up").value == "None."
    assert embed.footer.text == f"Checked by {owner}"
    assert embed.timestamp == sim.env.now(), "the moment of the check"


async def test_a_channel_where_the_bot_may_not_send_is_named(sim: Sim) -> None:
    me = sim.bot.get_guild(sim.guild.id).me
    await sim.bot.get_channel(sim.gm_cues.id).set_permissions(me, send_messages=False)
    await sim.env.advance_time(TICK)
    embed = await _health(sim)
    assert embed.title == "❌ Health: 1 problem"
    problem = f"#gm_cues (GM cues): the bot is missing Send Messages in #gm-cues ({sim.gm_cues.id})"
    assert embed.description == f"❌ {problem}"
    channels = _field(embed, "Channels")
    assert channels.name == "Channels (5 of 6 fine)"
    assert channels.value == f"❌ {problem}"


async def test_a_stalled_and_a_degraded_run_are_listed(sim: Sim) -> None:
    """The run is started, then marked as the tick would mark it (nobody advances it): the health
    answer lists it under the runs, stalled first, and counts it as a problem; a degraded one is a
    warning only."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await _set_run(sim, 1, health="stalled", wake_at=None)
    embed = await _health(sim)
    assert embed.title == "❌ Health: 1 problem"
    assert embed.description == "❌ 1 run stalled: nobody has advanced it when due"
    unwell = _field(embed, "Runs stalled or degraded")
    assert unwell.name == "Runs stalled or degraded (1)"
    assert unwell.value == "`1` Harbour Raid — running, stalled"

    await _set_run(sim, 1, health="degraded", last_error="step 1 (Call to arms) failed: Discord said no")
    embed = await _health(sim)
    assert embed.title == "⚠️ Health: healthy, with warnings"
    assert embed.description == "⚠️ 1 run degraded: a step failed or was retried, and the run carried on"
    assert _field(embed, "Runs stalled or degraded").value == (
        "`1` Harbour Raid — running, degraded\n  ↳ step 1 (Call to arms) failed: Discord said no"
    )


async def test_a_member_without_a_staff_role_is_refused(sim: Sim) -> None:
    result = await sim.player.slash(sim.general, "event health")
    assert result.ephemeral
    assert "You need one of these roles to use the event commands" in result.response.content
    assert not result.response.embeds
    gm = await sim.gm.slash(sim.staff, "event health")
    assert gm.response.embeds[0].title.endswith("healthy"), "any staff capability may read it"


async def test_the_answer_fits_discords_limits_with_many_runs_and_processes(sim: Sim) -> None:
    """Sixty stuck runs with long scopes and errors, sixty processes with the longest owners
    (half of them dead), and a channel refused: every part is within Discord's limits, and what
    did not fit is counted rather than cut."""
    now = sim.now()
    for index in range(60):
        seen = now - dt.timedelta(minutes=10 if index % 2 else 0)
        beat = Heartbeat(sim.engine, f"{'h' * 50}:{index:05d}:{index:06x}", ManualClock(seen), interval=TICK)
        assert await beat.beat()
    world = World(sim.engine)
    ids = []
    for index in range(60):
        run_id = await world.seed_run([phase("main", step("test.a"))], scope=f"{'s' * 150}{index}")
        await _set_run(
            sim,
            run_id,
            status="running",
            health="stalled" if index % 2 else "degraded",
            last_error="e" * 500,
            wake_at=now - dt.timedelta(hours=1) if index % 3 == 0 else None,
        )
        ids.append(run_id)
    me = sim.bot.get_guild(sim.guild.id).me
    await sim.bot.get_channel(sim.announcements.id).set_permissions(me, send_messages=False)

    embed = await _health(sim)
    _within_limits(embed)
    assert embed.title == "❌ Health: 3 problems"
    assert "❌ 30 runs stalled: nobody has advanced them when due" in (embed.description or "")
    unwell = _field(embed, "Runs stalled or degraded")
    assert unwell.name == "Runs stalled or degraded (60)"
    assert "more" in (unwell.value or "") and (unwell.value or "").endswith("(60 in all)")
    assert _field(embed, "Runs due but not picked up").name == "Runs due but not picked up (20)"
    assert "⚠️ 30 processes have not been seen for a while (up to 10 min)" in (embed.description or "")
    processes = _field(embed, "Processes")
    assert processes.name == "Processes (31 alive of 61)"
    owner = sim.bot.services.runner.owner
    assert (processes.value or "").startswith(f"🟢 `{owner}` (this process)"), "the one answering first"
    assert (processes.value or "").endswith(" more")
    assert _field(embed, "Channels").name == "Channels (5 of 6 fine)"


async def test_a_bot_that_closes_cleanly_leaves_no_heartbeat_behind(sim: Sim) -> None:
    """Closing the bot deletes its row, so health does not list it as a process that died."""
    await sim.env.advance_time(TICK)
    owner = sim.bot.services.runner.owner
    assert [p.owner for p in (await _health_report(sim)).processes] == [owner]
    await sim.bot.close()
    assert (await _health_report(sim)).processes == []


async def _health_report(sim: Sim) -> HealthReport:
    return await health(sim.engine, sim.now(), interval_seconds=TICK)


def test_a_database_that_cannot_be_reached_is_said_in_the_title_and_the_rest_still_checked() -> None:
    """The view answers an unreachable database rather than raising; the embed says so, leaves
    out what needs the database, and still shows the channels the bot checked on its own."""
    report = HealthReport(
        dt.datetime(2026, 9, 2, 12),
        DatabaseHealth(False, "mariadb", error='OperationalError: (2003, "Can\'t connect")'),
    )
    found = BotHealth(report, "box:1:ab", 0.042, [ChannelCheck("staff_log", "staff log", [])], None)
    embed = health_embed(found)
    assert embed.title == "❌ Health: 1 problem"
    assert (
        embed.description == '❌ the database cannot be reached: OperationalError: (2003, "Can\'t connect")'
    )
    assert [f.name for f in embed.fields] == ["Database", "Discord", "Channels (1 of 1 fine)"]
    assert embed.fields[0].value == "cannot be reached"
    assert embed.fields[1].value == "gateway latency 42 ms"


async def test_manage_events_missing_for_a_mirrored_event_is_a_problem(sim: Sim) -> None:
    """The mirror's own check, reused: an event listed in the Events tab and a bot role without
    Manage Events."""
    backend = sim.env.backend
    bot_role = next(r for r in backend.get_guild(sim.guild.id).roles.values() if r.managed)
    perms = discord.Permissions(bot_role.permissions)
    perms.manage_events = False
    backend.edit_role(sim.guild.id, bot_role.id, {"permissions": perms.value})
    await sim.env.settle()
    embed = await _health(sim)
    assert embed.title == "✅ Health: healthy", "nothing is mirrored yet: Manage Events is not needed"

    await sim.publish(mirrored_spec(sim))
    embed = await _health(sim)
    assert embed.title == "❌ Health: 1 problem"
    assert (embed.description or "").startswith("❌ Events tab: the bot lacks the Manage Events permission")
    assert (embed.description or "").endswith("(mirrored: quiz)")


async def test_the_bot_beats_once_per_tick_interval_however_often_it_ticks(sim: Sim) -> None:
    """A minute of an idle bot is a beat an interval, and a burst of commands (each nudging a
    tick) adds none."""
    ticker = sim.bot.ticker
    assert ticker is not None
    before_beats = ticker.heartbeat.beats
    await sim.env.advance_time(60)
    assert ticker.heartbeat.beats - before_beats == 60 / TICK
    before_beats, before_ticks = ticker.heartbeat.beats, ticker.ticks
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    for _ in range(2):
        await sim.mod.slash(sim.staff, "event pause", run=1)
        await sim.mod.slash(sim.staff, "event resume", run=1)
    assert ticker.ticks > before_ticks, "the controls nudged ticks"
    assert ticker.heartbeat.beats == before_beats, "nudged ticks within the interval write nothing"
