"""The event thread (``discord.thread``) and the attendee role, through simcord: one thread on
the run's announcement even when the bot restarts mid-step, the confirmed attendees added (and
taken out again when they give up their seat, but not at the end), the thread archived when the
run ends; the attendee role granted on confirm and taken back on leave
and at the end (kept while the member is confirmed in another run using it); preflight refusing
without the permissions. Every request is checked against Discord's OpenAPI by the plugin."""

from __future__ import annotations

import datetime as dt
from typing import Any

import discord
import pytest
import sqlalchemy as sa

from bridge.threads import RunThreads
from runner import catalog, signups
from runner.history import Actor
from runner.schema import attendee_grants, run_threads, thread_members
from tests.bot.conftest import Sim, make_config
from tests.support.definitions import announce, event, phase, step, wait

ALREADY_CREATED = 160004


def thread(name: str = "{title} chat", **params: Any) -> dict[str, Any]:
    return step("discord.thread", {"name": name, **params}, on_failure="pause")


def night(
    key: str = "night", attendee_role: str | None = "raiders", options: Any = ("going",), **fields: Any
) -> dict[str, Any]:
    signup: dict[str, Any] = {
        "options": options if isinstance(options, dict) else list(options),
        "channel": "general",
    }
    if attendee_role:
        signup["attendee_role"] = attendee_role
    return event(
        key,
        phase(
            "main",
            announce("Raid night begins!", label="Call"),
            thread(),
            wait(60),
            announce("Well fought."),
        ),
        title="Raid Night",
        signup=signup,
        **fields,
    )


async def with_raiders_role(sim: Sim) -> None:
    """A role for attendees (created below the bot's own) in the config, and the bot restarted on it."""
    sim.roles["raiders"] = sim.guild.create_role("Raiders")
    sim.config = make_config(sim.guild, sim.channels, sim.roles)
    await sim.start_bot()


async def book(sim: Sim, key: str, in_seconds: float = 60) -> int:
    """A run of ``key`` scheduled ``in_seconds`` from now: sign-ups are open until it starts."""
    async with sim.engine.begin() as conn:
        current = await catalog.current(conn, key, catalog.VersionCache())
        starts = sim.now() + dt.timedelta(seconds=in_seconds)
        run_id = await catalog.create_run(conn, current, "", starts, sim.now(), actor=Actor(None, "test"))
    assert run_id is not None
    return run_id


async def join(sim: Sim, run_id: int, member: Any) -> object:
    return await signups.join(sim.engine, run_id, str(member.id), member.name, "going", (), sim.now())


def preflight_text(result: Any) -> str:
    """What a start's preflight answered: its problems, or nothing when it started."""
    embeds = result.response.embeds
    return (embeds[0].description or "") if embeds else ""


def roles_of(sim: Sim, member: Any) -> set[int]:
    return set(sim.env.backend.get_member(sim.guild.id, member.id).role_ids)


def threads_of(sim: Sim) -> list[Any]:
    return [c for c in sim.env.backend.channels.values() if c.is_thread]


async def recorded_threads(sim: Sim) -> list[sa.RowMapping]:
    async with sim.engine.connect() as conn:
        return list((await conn.execute(sa.select(run_threads))).mappings())


async def recorded_members(sim: Sim) -> set[str]:
    async with sim.engine.connect() as conn:
        return {str(m) for m in (await conn.execute(sa.select(thread_members.c.member_id))).scalars()}


async def started_with_two_attendees(sim: Sim) -> tuple[int, Any]:
    """A run of ``night`` (no attendee role) with the player and the GM confirmed, started, its
    thread made and both added to it; the run's id and the thread."""
    await sim.publish(night(attendee_role=None))
    run_id = await book(sim, "night")
    await join(sim, run_id, sim.player)
    await join(sim, run_id, sim.gm)
    await sim.env.advance_time(65)
    await sim.env.advance_time(10)
    (started,) = threads_of(sim)
    assert {sim.player.id, sim.gm.id} <= set(started.thread_members)
    return run_id, started


async def grants(sim: Sim) -> set[tuple[str, str]]:
    async with sim.engine.connect() as conn:
        rows = await conn.execute(sa.select(attendee_grants.c.role_id, attendee_grants.c.member_id))
        return {(str(r), str(m)) for r, m in rows}


async def test_a_thread_is_started_on_the_announcement_attendees_added_and_archived_at_the_end(
    sim: Sim,
) -> None:
    await with_raiders_role(sim)
    await sim.publish(night())
    run_id = await book(sim, "night")
    await join(sim, run_id, sim.player)
    await sim.env.advance_time(65)

    announcement = sim.announcements.history()[0]
    (started,) = threads_of(sim)
    assert started.id == announcement.id, "a thread started from a message has the message's id"
    assert started.name == "Raid Night chat"
    assert sim.requests("POST", f"/channels/{sim.announcements.id}/messages/{announcement.id}/threads")
    (row,) = await recorded_threads(sim)
    assert (row["run_id"], row["thread_id"], row["archived_at"]) == (run_id, str(started.id), None)
    await sim.env.advance_time(10)
    assert sim.player.id in started.thread_members
    assert not started.thread_metadata.archived

    await sim.env.advance_time(70)
    run = await sim.run(run_id)
    assert run.status == "completed"
    assert started.thread_metadata.archived
    (row,) = await recorded_threads(sim)
    assert row["archived_at"] is not None
    patches = sim.requests("PATCH", f"/channels/{started.id}")
    assert len(patches) == 1 and patches[0].json == {"archived": True}


async def test_a_member_who_gives_up_their_seat_is_taken_out_of_the_thread_once_and_the_rest_stay_at_the_end(
    sim: Sim,
) -> None:
    run_id, started = await started_with_two_attendees(sim)
    await signups.leave(sim.engine, run_id, str(sim.gm.id), sim.gm.name, sim.now())
    await sim.env.advance_time(6)
    out = f"/channels/{started.id}/thread-members/{sim.gm.id}"
    assert len(sim.requests("DELETE", out)) == 1
    assert sim.gm.id not in started.thread_members
    assert sim.player.id in started.thread_members
    assert await recorded_members(sim) == {str(sim.player.id)}

    # A new process reads what was done from the database: nothing is asked again.
    await sim.start_bot()
    await sim.env.advance_time(6)
    assert len(sim.requests("DELETE", out)) == 1
    assert len(sim.requests("PUT", f"/channels/{started.id}/thread-members/{sim.player.id}")) == 1

    await sim.env.advance_time(60)
    assert (await sim.run(run_id)).status == "completed"
    assert started.thread_metadata.archived
    assert sim.player.id in started.thread_members, "the end archives the thread, it empties nobody out"
    assert [r.path for r in sim.env.http_requests if r.method == "DELETE" and "thread-members" in r.path] == [
        out
    ]


async def test_a_member_who_joined_the_thread_on_their_own_is_not_taken_out(sim: Sim) -> None:
    run_id, started = await started_with_two_attendees(sim)
    sim.env.backend.add_thread_member(started.id, sim.mod.id)
    await signups.leave(sim.engine, run_id, str(sim.gm.id), sim.gm.name, sim.now())
    await sim.env.advance_time(6)
    assert sim.gm.id not in started.thread_members
    assert sim.mod.id in started.thread_members, "never signed up, never added by the bot"
    assert sim.requests("DELETE", f"/channels/{started.id}/thread-members/{sim.mod.id}") == []


async def test_a_member_already_off_the_server_counts_as_taken_out(sim: Sim) -> None:
    run_id, started = await started_with_two_attendees(sim)
    out = f"/channels/{started.id}/thread-members/{sim.gm.id}"
    sim.env.inject_error("DELETE", out, status=404, code=10007, message="Unknown Member")
    await signups.leave(sim.engine, run_id, str(sim.gm.id), sim.gm.name, sim.now())
    await sim.env.advance_time(6)
    await sim.env.advance_time(6)
    assert len(sim.requests("DELETE", out)) == 1, "not asked again"
    assert await recorded_members(sim) == {str(sim.player.id)}


async def test_a_thread_deleted_by_a_moderator_is_closed_when_taking_a_member_out_finds_it_gone(
    sim: Sim,
) -> None:
    run_id, started = await started_with_two_attendees(sim)
    out = f"/channels/{started.id}/thread-members/{sim.gm.id}"
    sim.env.inject_error("DELETE", out, status=404, code=10003, message="Unknown Channel")
    await signups.leave(sim.engine, run_id, str(sim.gm.id), sim.gm.name, sim.now())
    await sim.env.advance_time(6)
    (row,) = await recorded_threads(sim)
    assert row["archived_at"] is not None, "nothing more is asked of a thread that is gone"
    await sim.env.advance_time(70)
    assert (await sim.run(run_id)).status == "completed"
    assert len(sim.requests("DELETE", out)) == 1
    assert sim.requests("PATCH", f"/channels/{started.id}") == []


async def test_defect_a_refused_removal_does_not_hold_up_adding_the_next_attendee(sim: Sim) -> None:
    """Taking a member out needs Manage Threads, which the bot may lack (403, 50013): that
    refusal waits a minute before it is asked again, but the member promoted into the freed seat
    is added at once."""
    await sim.publish(night(attendee_role=None, options={"going": 1}))
    run_id = await book(sim, "night")
    await join(sim, run_id, sim.player)
    await join(sim, run_id, sim.gm)  # waiting
    await sim.env.advance_time(65)
    await sim.env.advance_time(10)
    (started,) = threads_of(sim)
    assert sim.player.id in started.thread_members and sim.gm.id not in started.thread_members
    out = f"/channels/{started.id}/thread-members/{sim.player.id}"
    sim.env.inject_error("DELETE", out, status=403, code=50013, message="Missing Permissions", times=None)
    await signups.leave(sim.engine, run_id, str(sim.player.id), sim.player.name, sim.now())
    await sim.env.advance_time(6)
    assert sim.gm.id in started.thread_members, "promoted, and added"
    await sim.env.advance_time(6)
    await sim.env.advance_time(6)
    assert len(sim.requests("DELETE", out)) == 1, "the refusal is not repeated every pass"
    assert await recorded_members(sim) == {str(sim.player.id), str(sim.gm.id)}


async def test_defect_a_refused_removal_was_asked_for_again_every_minute(sim: Sim) -> None:
    """A 403 is final for that thread's removals: asked once over half an hour (not 30 times,
    each an invalid request toward Discord's IP ban), and staff told once."""
    long_night = event(
        "night",
        phase("main", announce("Raid night begins!", label="Call"), thread(), wait("40m")),
        title="Raid Night",
        signup={"options": {"going": 1}, "channel": "general"},
    )
    await sim.publish(long_night)
    run_id = await book(sim, "night")
    await join(sim, run_id, sim.player)
    await sim.env.advance_time(75)
    (started,) = threads_of(sim)
    out = f"/channels/{started.id}/thread-members/{sim.player.id}"
    sim.env.inject_error("DELETE", out, status=403, code=50013, message="Missing Permissions", times=None)
    await signups.leave(sim.engine, run_id, str(sim.player.id), sim.player.name, sim.now())
    for _ in range(30):
        await sim.env.advance_time(60)
    assert len(sim.requests("DELETE", out)) == 1
    told = [m.content for m in sim.staff_log.history() if "event thread: Discord refused" in m.content]
    assert len(told) == 1 and "taking member" in told[0]


async def test_defect_a_restart_between_the_thread_and_its_record_starts_no_second_thread(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first POST succeeds; the process dies before it records the thread (here: the
    record raises, and the bot is restarted before the step's retry). The retry's POST gets
    Discord's 160004 ("a thread has already been created for this message"; simcord does not
    model that answer, so it is injected, as Discord gives it) and the step succeeds with the
    thread the first attempt made."""
    await sim.publish(event("chat", phase("main", announce("Hello", label="Call"), thread("Talk"))))
    original = RunThreads.record

    async def dies_before_recording(self: RunThreads, *args: Any) -> None:
        raise RuntimeError("the process died before recording the thread")

    monkeypatch.setattr(RunThreads, "record", dies_before_recording)
    await sim.mod.slash(sim.staff, "event start", definition="chat")
    announcement = sim.announcements.history()[0]
    path = f"/channels/{sim.announcements.id}/messages/{announcement.id}/threads"
    assert len(sim.requests("POST", path)) == 1
    assert len(threads_of(sim)) == 1
    assert await recorded_threads(sim) == []
    run = await sim.only_run()
    assert run.phases[0].steps[1].status == "pending", "to be retried"

    monkeypatch.setattr(RunThreads, "record", original)
    await sim.start_bot()
    sim.env.inject_error(
        "POST",
        path,
        status=400,
        code=ALREADY_CREATED,
        message="A thread has already been created for this message",
    )
    await sim.env.advance_time(30)

    assert len(sim.requests("POST", path)) == 2
    (only,) = threads_of(sim)
    run = await sim.only_run()
    assert run.status == "completed"
    assert run.phases[0].steps[1].status == "done"
    (row,) = await recorded_threads(sim)
    assert row["thread_id"] == str(only.id) == str(announcement.id)


async def test_a_thread_goes_on_the_announcement_its_step_names(sim: Sim) -> None:
    await sim.publish(
        event(
            "two",
            phase(
                "main",
                announce("First", label="Muster"),
                announce("Second", label="Later"),
                thread("Muster talk", on="Muster"),
            ),
        )
    )
    await sim.mod.slash(sim.staff, "event start", definition="two")
    first, _second = [m for m in sim.announcements.history() if m.type == discord.MessageType.default]
    (started,) = threads_of(sim)
    assert started.id == first.id


async def test_preflight_refuses_a_thread_without_the_thread_permissions(sim: Sim) -> None:
    await sim.publish(event("chat", phase("main", announce("Hello"), thread("Talk"))))
    me = sim.bot.get_guild(sim.guild.id).me
    await sim.bot.get_channel(sim.announcements.id).set_permissions(
        me, create_public_threads=False, send_messages_in_threads=False
    )
    await sim.env.settle()
    result = await sim.mod.slash(sim.staff, "event start", definition="chat")
    text = preflight_text(result)
    assert (
        f"phase 'main', 2nd step: the bot is missing Create Public Threads, Send Messages in Threads "
        f"in #announcements ({sim.announcements.id}): the event's thread needs them"
    ) in text, text
    assert sim.announcements.history() == [], "nothing started"
    assert threads_of(sim) == []


async def test_preflight_names_a_thread_step_with_no_announcement_before_it(sim: Sim) -> None:
    await sim.publish(event("bare", phase("main", thread("Talk", on="Nowhere"), announce("Hello"))))
    result = await sim.mod.slash(sim.staff, "event start", definition="bare")
    assert "no discord.announce step labelled 'Nowhere' comes before this thread step" in preflight_text(
        result
    )


async def test_the_attendee_role_is_granted_on_confirm_and_removed_on_leave_and_at_the_end(sim: Sim) -> None:
    await with_raiders_role(sim)
    raiders = sim.roles["raiders"].id
    await sim.publish(night())
    run_id = await book(sim, "night", in_seconds=120)
    await join(sim, run_id, sim.player)
    await join(sim, run_id, sim.gm)
    await sim.env.advance_time(6)
    assert raiders in roles_of(sim, sim.player) and raiders in roles_of(sim, sim.gm)
    put = f"/guilds/{sim.guild.id}/members/{sim.player.id}/roles/{raiders}"
    assert len(sim.requests("PUT", put)) == 1

    await signups.leave(sim.engine, run_id, str(sim.gm.id), sim.gm.name, sim.now())
    await sim.env.advance_time(6)
    assert raiders not in roles_of(sim, sim.gm)
    assert raiders in roles_of(sim, sim.player)
    assert await grants(sim) == {(str(raiders), str(sim.player.id))}

    await sim.env.advance_time(200)
    assert (await sim.run(run_id)).status == "completed"
    assert raiders not in roles_of(sim, sim.player)
    assert await grants(sim) == set()
    assert len(sim.requests("PUT", put)) == 1, "granted once"
    assert len(sim.requests("DELETE", put)) == 1, "removed once"


async def test_a_shared_attendee_role_stays_with_a_member_confirmed_for_another_run(sim: Sim) -> None:
    await with_raiders_role(sim)
    raiders = sim.roles["raiders"].id
    await sim.publish(night("early"))
    await sim.publish(night("late"))
    early = await book(sim, "early", in_seconds=30)
    late = await book(sim, "late", in_seconds=3600)
    await join(sim, early, sim.player)
    await join(sim, late, sim.player)
    await sim.env.advance_time(6)
    assert raiders in roles_of(sim, sim.player)

    await sim.env.advance_time(120)
    assert (await sim.run(early)).status == "completed"
    assert raiders in roles_of(sim, sim.player), "still confirmed for the late run"
    assert sim.requests("DELETE", f"/guilds/{sim.guild.id}/members/{sim.player.id}/roles/{raiders}") == []


async def test_preflight_refuses_an_attendee_role_above_the_bots_own(sim: Sim) -> None:
    sim.roles["raiders"] = sim.guild.create_role("Raiders", position=50)
    sim.config = make_config(sim.guild, sim.channels, sim.roles)
    await sim.start_bot()
    await sim.publish(night())
    result = await sim.mod.slash(sim.staff, "event start", definition="night")
    assert "attendee role @Raiders is not below the bot's highest role" in preflight_text(result)


async def test_preflight_refuses_an_attendee_role_without_manage_roles(sim: Sim) -> None:
    await with_raiders_role(sim)
    # A server admin takes Manage Roles from the bot's integration role (which the bot itself
    # may not edit: it is its own highest role).
    backend = sim.env.backend
    bot_role = backend.get_role(sim.guild.id, sim.bot.get_guild(sim.guild.id).me.top_role.id)
    bot_role.permissions &= ~discord.Permissions(manage_roles=True).value
    backend.announce_role_updates(sim.guild.id, [bot_role])
    await sim.env.settle()
    assert not sim.bot.get_guild(sim.guild.id).me.guild_permissions.manage_roles
    await sim.publish(night())
    result = await sim.mod.slash(sim.staff, "event start", definition="night")
    assert "the bot lacks Manage Roles, so attendee role @Raiders cannot be given" in preflight_text(result)


async def test_event_health_names_the_thread_and_attendee_role_permissions_a_published_event_lacks(
    sim: Sim,
) -> None:
    sim.roles["raiders"] = sim.guild.create_role("Raiders", position=50)
    sim.config = make_config(sim.guild, sim.channels, sim.roles)
    await sim.start_bot()
    await sim.publish(night())
    me = sim.bot.get_guild(sim.guild.id).me
    await sim.bot.get_channel(sim.announcements.id).set_permissions(me, create_public_threads=False)
    await sim.env.settle()

    result = await sim.mod.slash(sim.staff, "event health")
    (embed,) = result.response.embeds
    text = embed.description or ""
    assert embed.title == "❌ Health: 2 problems", text
    assert (
        f"night: the bot is missing Create Public Threads in #announcements ({sim.announcements.id}): "
        "the event's thread needs them"
    ) in text
    assert "night: attendee role @Raiders is not below the bot's highest role" in text


async def test_defect_a_refused_attendee_role_is_not_asked_for_again_every_pass(sim: Sim) -> None:
    """A role above the bot's would be refused (403); asking at every tick would pile up invalid
    requests, which Discord limits. The bot sees the role's place in its cache and asks nothing,
    tells the staff once, and gives the role once it is moved below the bot's."""
    sim.roles["raiders"] = sim.guild.create_role("Raiders", position=50)
    sim.config = make_config(sim.guild, sim.channels, sim.roles)
    await sim.start_bot()
    await sim.publish(night())
    run_id = await book(sim, "night", in_seconds=600)
    await join(sim, run_id, sim.player)
    await sim.env.advance_time(300)
    put = f"/guilds/{sim.guild.id}/members/{sim.player.id}/roles/{sim.roles['raiders'].id}"
    assert sim.requests("PUT", put) == []
    assert sim.roles["raiders"].id not in roles_of(sim, sim.player)
    assert await grants(sim) == set()
    told = [m for m in sim.staff_log.history() if "cannot give or take attendee role @Raiders" in m.content]
    assert len(told) == 1

    backend = sim.env.backend
    role = backend.get_role(sim.guild.id, sim.roles["raiders"].id)
    role.position = 1
    backend.announce_role_updates(sim.guild.id, [role])
    await sim.env.advance_time(10)
    assert len(sim.requests("PUT", put)) == 1
    assert sim.roles["raiders"].id in roles_of(sim, sim.player)


async def test_defect_a_thread_an_offline_rehearsal_recorded_is_closed_without_asking_discord(
    sim: Sim,
) -> None:
    """The console rehearsal names its messages (and so its threads) ``console-N``; one left in a
    shared database must not stop the loop from archiving the real threads after it."""
    await sim.publish(event("chat", phase("main", announce("Hello"), thread("Talk"))))
    await sim.mod.slash(sim.staff, "event start", definition="chat")
    run = await sim.only_run()
    await RunThreads(sim.engine, sim.bot.clock).record(run.id, 1, "console", "console-1")
    await sim.env.advance_time(10)
    assert all(row["archived_at"] is not None for row in await recorded_threads(sim))
    (real,) = threads_of(sim)
    assert real.thread_metadata.archived
    assert [r.path for r in sim.env.http_requests if r.method == "PATCH"] == [f"/channels/{real.id}"]
