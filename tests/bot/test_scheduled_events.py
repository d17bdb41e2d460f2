"""The Events-tab mirror through the real bot in simcord: one Discord scheduled event per
occurrence, moved on with its run, never duplicated by a restart or a second process, and a
missing Manage Events permission reported while the run itself completes."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import discord
import pytest
import sqlalchemy as sa

from bot.cogs.events_tab._loop import Mirror, listing_status_line
from bridge.listings import ListingService
from runner.schema import listings, runs
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim, make_config
from tests.support.definitions import announce, cron, event, phase, wait

LEAD = 600  # the occurrence starts this many seconds after the test does


@pytest.fixture(autouse=True)
async def listing_horizon(sim: Sim) -> None:
    """An hour's horizon, so only the first of the daily occurrences is listed; and a voice
    channel a definition can name as its location."""
    assert sim.env.now().time() == dt.time(0, 0)
    sim.channels["lounge"] = sim.guild.create_voice_channel("Lounge")
    sim.config = make_config(sim.guild, sim.channels, sim.roles, discord_events={"horizon": "1h"})
    with sim.env.time_context():
        await sim.start_bot()


def mirrored_spec(sim: Sim, **overrides: Any) -> dict[str, Any]:
    # Daily, LEAD seconds after the simulation's start (midnight UTC; see the fixture).
    spec = event(
        "quiz",
        phase("main", announce("Quiz time!"), wait(60), announce("Thanks for playing")),
        title="Pub Quiz",
        description="Weekly trivia.",
        schedule=cron(f"{LEAD // 60} 0 * * *"),
        duration="1h",
        discord_event={"location": "The Lounge"},
    )
    spec.update(overrides)
    return spec


def created(sim: Sim) -> list[Any]:
    return sim.requests("POST", f"/guilds/{sim.guild.id}/scheduled-events")


def events_of(sim: Sim) -> list[Any]:
    return list(sim.env.backend.get_guild(sim.guild.id).scheduled_events.values())


async def listing_rows(sim: Sim) -> list[Any]:
    async with sim.engine.connect() as conn:
        return list((await conn.execute(sa.select(listings))).mappings().all())


async def quiz_run_id(sim: Sim) -> int:
    runs = [r for r in await list_runs(sim.engine) if r.definition_key == "quiz"]
    return min(r.id for r in runs)


async def test_one_discord_event_per_occurrence_started_and_completed_with_the_run(sim: Sim) -> None:
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    assert listed.name == "Pub Quiz"
    assert listed.description == "Weekly trivia."
    assert listed.entity_type == 3 and listed.entity_metadata == {"location": "The Lounge"}
    assert listed.status == 1
    start = dt.datetime.fromisoformat(listed.scheduled_start_time)
    end = dt.datetime.fromisoformat(listed.scheduled_end_time)
    assert end - start == dt.timedelta(hours=1)
    assert abs((start - sim.env.now()).total_seconds() - LEAD) < TICK * 3

    await sim.env.advance_time(LEAD)  # the run starts; Discord starts the event on its own too
    assert listed.status == 2
    await sim.env.advance_time(90)  # past the 60 s wait: the run completes, an hour early
    run = await sim.run(await quiz_run_id(sim))
    assert run.status == "completed"
    assert listed.status == 3, "the event is ended with the run, not left running to its end time"
    assert len(created(sim)) == 1
    [row] = await listing_rows(sim)
    assert (row["external_id"], row["pushed_status"]) == (str(listed.id), "completed")
    passes = sim.bot.mirror.passes
    requests = sim.bot.mirror.requests
    await sim.env.advance_time(TICK * 6)
    assert sim.bot.mirror.passes > passes
    assert sim.bot.mirror.requests == requests, "idle passes make no requests"


async def test_a_cancelled_run_cancels_its_discord_event(sim: Sim) -> None:
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    result = await sim.bot.services.controls.cancel(await quiz_run_id(sim), reason="host is ill")
    assert result.ok
    await sim.env.advance_time(TICK * 2)
    assert listed.status == 4
    [row] = await listing_rows(sim)
    assert row["pushed_status"] == "cancelled"
    assert len(created(sim)) == 1


async def test_a_restart_mid_way_creates_no_second_event(sim: Sim) -> None:
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    await sim.start_bot()  # a new process: only the database and Discord carry over
    await sim.env.advance_time(LEAD + 20)
    assert (await sim.run(await quiz_run_id(sim))).status == "running"
    assert listed.status == 2
    await sim.start_bot()  # and again, mid-run
    await sim.env.advance_time(70)
    assert (await sim.run(await quiz_run_id(sim))).status == "completed"
    assert len(created(sim)) == 1
    assert [e.id for e in events_of(sim)] == [listed.id]
    assert listed.status == 3
    edits = sim.requests("PATCH", f"/guilds/{sim.guild.id}/scheduled-events/{listed.id}")
    assert [(e.json or {}).get("status") for e in edits] == [3], "ended once; Discord started it itself"


async def test_a_process_that_died_after_the_create_is_adopted_not_repeated(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discord created the event but the process died before storing its id: the next process
    finds it among the bot's own events (name and start) and adopts it."""

    async def died(self: ListingService, work: Any, external_id: str) -> None:
        raise RuntimeError("the process died here")

    monkeypatch.setattr(ListingService, "created", died)
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    [row] = await listing_rows(sim)
    assert row["external_id"] is None
    monkeypatch.undo()
    await sim.start_bot()
    # The failed claim backs off (300 s) before any process retries it.
    await sim.env.advance_time(LEAD + 90)
    assert len(created(sim)) == 1
    [row] = await listing_rows(sim)
    assert row["external_id"] == str(listed.id)
    assert listed.status == 3


async def test_two_processes_on_one_database_create_one_event(sim: Sim) -> None:
    """A second process (its own owner and listing service, the same guild during a shard
    handover) passes at the same moment as the first: one of them creates the event."""
    other = Mirror(
        sim.bot.kit,
        ListingService(
            sim.engine,
            sim.bot.services.versions,
            sim.bot.clock,
            "other-process",
            mirror_by_default=False,
        ),
        lease=sim.bot.lease_for("events-mirror"),
        interval=TICK,
    )
    await sim.bot.mirror.loop.stop()  # pass by hand, both at once
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK)  # the tick materialises the occurrence
    assert created(sim) == []
    with sim.env.time_context():
        await asyncio.gather(sim.bot.mirror.pass_once(), other.pass_once())
        await asyncio.gather(sim.bot.mirror.pass_once(), other.pass_once())
    assert len(created(sim)) == 1
    assert len(events_of(sim)) == 1
    assert sim.bot.mirror.requests + other.requests == 1


async def test_a_missing_manage_events_permission_is_reported_and_the_run_still_completes(sim: Sim) -> None:
    backend = sim.env.backend
    guild = backend.get_guild(sim.guild.id)
    bot_role = next(r for r in guild.roles.values() if r.managed)
    perms = discord.Permissions(bot_role.permissions)
    perms.manage_events = False
    backend.edit_role(sim.guild.id, bot_role.id, {"permissions": perms.value})
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    line = await listing_status_line(sim.bot.mirror)
    assert line is not None and "Manage Events" in line and "quiz" in line
    status = await sim.mod.slash(sim.staff, "event status")
    assert status.response.content == line, "/event status says so above its embed"
    await sim.env.advance_time(LEAD + 90)
    assert (await sim.run(await quiz_run_id(sim))).status == "completed"
    assert created(sim) == []
    staff = [
        r for r in sim.posts_to(sim.staff_log) if "Manage Events" in str((r.json or {}).get("content", ""))
    ]
    assert len(staff) == 1, "shown to staff once, however many passes"


async def test_a_voice_channel_location_makes_a_voice_event_in_that_channel(sim: Sim) -> None:
    await sim.publish(mirrored_spec(sim, discord_event={"location": "lounge"}))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    assert (listed.entity_type, listed.channel_id) == (2, sim.lounge.id)
    await sim.env.advance_time(LEAD + 90)
    assert listed.status == 3
    assert len(created(sim)) == 1


async def test_an_event_deleted_in_discord_is_not_recreated(sim: Sim) -> None:
    """Staff deleted the listed event by hand: the run goes on, the listing is marked gone, and
    no second event appears when the run starts or ends."""
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    sim.env.backend.delete_scheduled_event(sim.guild.id, listed.id)
    await sim.env.advance_time(LEAD + 90)
    assert (await sim.run(await quiz_run_id(sim))).status == "completed"
    assert events_of(sim) == []
    assert len(created(sim)) == 1
    [row] = await listing_rows(sim)
    assert (row["external_id"], row["pushed_status"]) == (str(listed.id), "gone")


async def test_a_new_version_of_the_event_edits_its_listed_entry(sim: Sim) -> None:
    """A publish that re-points the occurrence at new text (done here by hand, as the publish's
    re-pointing would) edits the Discord event in place: same event, new name and place."""
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    newer = await sim.publish(mirrored_spec(sim, title="Grand Quiz", discord_event={"location": "The Attic"}))
    async with sim.engine.begin() as conn:
        await conn.execute(sa.update(runs).values(version_id=newer.version_id))
    await sim.env.advance_time(TICK * 2)
    assert (listed.name, listed.entity_metadata) == ("Grand Quiz", {"location": "The Attic"})
    assert [e.id for e in events_of(sim)] == [listed.id]
    assert len(sim.requests("PATCH", f"/guilds/{sim.guild.id}/scheduled-events/{listed.id}")) == 1


async def test_the_event_is_started_with_the_run_when_discord_does_not_start_it(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discord may leave an event scheduled past its start time (it waits for its host): the
    run's start starts it, and the run's end ends it, one request each."""
    monkeypatch.setattr(sim.env.backend, "activate_due_scheduled_events", lambda: None)
    await sim.publish(mirrored_spec(sim))
    await sim.env.advance_time(TICK * 2)
    [listed] = events_of(sim)
    await sim.env.advance_time(LEAD + 20)
    assert listed.status == 2
    await sim.env.advance_time(70)
    assert listed.status == 3
    edits = sim.requests("PATCH", f"/guilds/{sim.guild.id}/scheduled-events/{listed.id}")
    assert [(e.json or {}).get("status") for e in edits] == [2, 3]
