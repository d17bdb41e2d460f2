"""Reminders to attendees by direct message (issue 28, item 5), through the real bot in simcord
(every request held to Discord's OpenAPI description by the plugin).

A reminder written ``to: attendees`` is a DM to each member seated in the run when it falls
due: one per member and reminder, never to a member on the waiting list nor to one who turned
reminders off with ``/reminders off``; a member whose DMs are closed (Discord's 50007) is
mentioned where the sign-up is, as a promotion's notice is. Two bot processes on one database
send each DM once, and a process that dies between claiming a DM and sending it leaves it to be
sent once, after its claim runs out.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import simcord

from bot.cogs.reminders import _loop as reminders_loop
from bridge import reminder_dms
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim
from tests.bot.test_reminders import advance_to
from tests.bot.two_processes import Pair
from tests.support.definitions import cron, event, phase, wait

# The simulation starts at midnight UTC; the event is daily at 00:10, its DM 5 minutes before.
REMINDER_AT = 5 * 60
CONTENT = "{title} starts {start_relative}: see you there!"


def dm_spec(**signup: Any) -> dict[str, Any]:
    return event(
        "raid-night",
        phase("main", wait("1m")),
        title="Raid Night",
        schedule=cron("10 0 * * *"),
        signup={"channel": "announcements", "options": {"going": 2}, **signup},
        reminders=[{"before": "5m", "to": "attendees", "content": CONTENT}],
    )


async def booked(sim: Sim) -> tuple[int, Any]:
    """Publish the event; the tick books today's occurrence and the loop posts its sign-up."""
    await sim.publish(dm_spec())
    await sim.env.advance_time(2 * TICK)
    runs = [r for r in await list_runs(sim.engine) if r.definition_key == "raid-night"]
    assert len(runs) == 1, runs
    message = sim.announcements.last_message
    assert message is not None and message.embeds and message.embeds[0].title == "Sign-ups: Raid Night"
    return runs[0].id, message


def dms_to(sim: Sim, member: simcord.MemberActor) -> list[str]:
    """What the bot sent to ``member``'s DM channel."""
    channel_id = sim.env.backend.dm_channels.get(member.id)
    if channel_id is None:
        return []
    return [
        str((r.json or {}).get("content")) for r in sim.requests("POST", f"/channels/{channel_id}/messages")
    ]


def start_stamp(sim: Sim) -> int:
    midnight = sim.env.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return int((midnight + dt.timedelta(minutes=10)).timestamp())


async def test_each_seated_member_gets_one_dm_at_the_reminders_moment_and_the_waiting_none(sim: Sim) -> None:
    """Two seats: the player and the GM are seated, a third member waits. Nothing before 00:05;
    just after it one DM each to the seated two (placeholders filled in, how to stop them
    under it), none to the one waiting; ``/event status`` shows the reminder sent, named as a
    DM to attendees; and no second DM at any later pass."""
    run_id, message = await booked(sim)
    waiting = sim.guild.add_member(sim.env.create_user("waiting"))
    for member in (sim.player, sim.gm, waiting):
        await member.click(message, label="going")
    await advance_to(sim, REMINDER_AT - TICK)
    assert dms_to(sim, sim.player) == [] and dms_to(sim, sim.gm) == []
    await advance_to(sim, REMINDER_AT + 2 * TICK)
    stamp = start_stamp(sim)
    expected = (
        f"Raid Night starts <t:{stamp}:R>: see you there!\n-# /reminders off: no more event reminders by DM"
    )
    assert dms_to(sim, sim.player) == [expected]
    assert dms_to(sim, sim.gm) == [expected]
    assert dms_to(sim, waiting) == []
    status = (await sim.mod.slash(sim.staff, "event status", run=run_id)).response
    reminders = next(f for f in status.embeds[0].fields if f.name == "Reminders")
    assert reminders.value.startswith("🔔 Reminder to attendees, 5m before") and reminders.value.endswith(
        "— sent"
    )
    await advance_to(sim, 9 * 60)
    assert len(dms_to(sim, sim.player)) == 1 and len(dms_to(sim, sim.gm)) == 1


async def test_a_member_who_turned_reminders_off_gets_none_and_on_again_gets_them(sim: Sim) -> None:
    """``/reminders off`` is for everyone (the player holds no staff role), ephemeral, and the
    seated member who used it gets no DM; the other seated member still does."""
    run_id, message = await booked(sim)
    await sim.player.click(message, label="going")
    await sim.gm.click(message, label="going")
    answered = await sim.player.slash(sim.general, "reminders off")
    assert answered.ephemeral
    assert "Reminders by DM are off" in last_text(answered)
    await advance_to(sim, REMINDER_AT + 2 * TICK)
    assert dms_to(sim, sim.player) == []
    assert len(dms_to(sim, sim.gm)) == 1
    rows = await reminder_dms.of_run(sim.engine, run_id)
    assert [row["member_id"] for row in rows] == [str(sim.gm.id)]
    again = await sim.player.slash(sim.general, "reminders on")
    assert "Reminders by DM are on" in last_text(again)
    assert not await reminder_dms.reminders_off(sim.engine, str(sim.player.id))


async def test_a_member_whose_dms_are_closed_is_mentioned_where_the_sign_up_is(sim: Sim) -> None:
    """simcord refuses a DM to a bot account with Discord's 50007, as Discord does closed DMs:
    that member is mentioned, alone, in the sign-up message's channel, once."""
    run_id, message = await booked(sim)
    closed = sim.guild.add_member(sim.env.create_user("closed-dms", bot=True))
    await closed.click(message, label="going")
    await advance_to(sim, REMINDER_AT + 2 * TICK)
    mentions = [m for m in sim.announcements.history() if m.content.startswith(f"<@{closed.id}>")]
    assert len(mentions) == 1 and "Raid Night starts" in mentions[0].content
    [row] = await reminder_dms.of_run(sim.engine, run_id)
    assert row["settled_as"] == "mention"
    await advance_to(sim, 9 * 60)
    assert len([m for m in sim.announcements.history() if m.content.startswith(f"<@{closed.id}>")]) == 1


async def test_two_bot_processes_on_one_database_send_each_dm_once(sim: Sim, pair: Pair) -> None:
    """A second process shares the database and the token: both tick, both may perform the
    reminder and both follow the DM rows, yet each seated member gets exactly one DM."""
    _, message = await booked(sim)
    await pair.join("second-process")
    members = [sim.player, sim.gm]
    for member in members:
        await member.click(message, label="going")
    await advance_to(sim, REMINDER_AT + 2 * TICK)
    for member in members:
        assert len(dms_to(sim, member)) == 1
    await advance_to(sim, 9 * 60)
    for member in members:
        assert len(dms_to(sim, member)) == 1


async def test_a_restart_between_claiming_a_dm_and_sending_it_sends_it_once(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bot claims the DMs and dies before sending them (its claims are in the database,
    nothing reached Discord). The restarted bot leaves them while the dead claims hold, then
    sends each once; it never sends one twice."""
    run_id, message = await booked(sim)
    await sim.player.click(message, label="going")
    await sim.gm.click(message, label="going")

    async def dies(*args: Any, **kwargs: Any) -> tuple[str | None, str | None]:
        raise ProcessDied

    monkeypatch.setattr(reminders_loop, "dm_or_mention", dies)
    await advance_to(sim, REMINDER_AT + TICK)
    rows = await reminder_dms.of_run(sim.engine, run_id)
    dead = sim.bot.services.runner.owner
    assert {(row["claimed_by"], row["settled_at"]) for row in rows} == {(dead, None)} and len(rows) == 2
    assert dms_to(sim, sim.player) == [] and dms_to(sim, sim.gm) == []
    monkeypatch.undo()
    with sim.env.time_context():
        await sim.start_bot()
    await sim.env.advance_time(2 * TICK)
    assert dms_to(sim, sim.player) == [], "sent while the dead process's claim held it"
    await sim.env.advance_time(reminder_dms.LEASE_SECONDS)
    assert len(dms_to(sim, sim.player)) == 1 and len(dms_to(sim, sim.gm)) == 1
    rows = await reminder_dms.of_run(sim.engine, run_id)
    assert {(row["settled_as"], row["attempts"]) for row in rows} == {("dm", 2)}
    await advance_to(sim, 9 * 60)
    assert len(dms_to(sim, sim.player)) == 1 and len(dms_to(sim, sim.gm)) == 1


class ProcessDied(Exception):
    """The process dies between the claim and the send (no settle, no DM)."""


def last_text(result: Any) -> str:
    return [m for m in [result.response, *result.followups] if m is not None and m.content][-1].content
