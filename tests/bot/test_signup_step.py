"""The ``discord.signup`` step and a cue's ``ping: attendees``, through simcord (every request
held to Discord's OpenAPI description by the plugin): the step posts the run's one sign-up
message, with the buttons and the edits a booking's has; a restart in the middle of the step
posts no second; a run whose message went up at booking gets none from the step; a cue pings
the confirmed attendees, not those waiting."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa

from bot.cogs.signups._messages import SignupMessages
from bridge import signup_messages
from runner import catalog, signups
from runner.history import Actor
from runner.schema import signup_messages as signup_messages_table
from tests.bot.conftest import Sim, buttons
from tests.support.definitions import announce, cue, event, phase, step, wait


def signup_step(**params: Any) -> dict[str, Any]:
    return step("discord.signup", params, on_failure="pause")


def muster(channel: str | None = None, **params: Any) -> dict[str, Any]:
    """An event whose sign-up message is the step's (its ``signup:`` has no channel, unless
    ``channel`` gives one)."""
    signup: dict[str, Any] = {"options": {"going": 2}, "closes": "end"}
    if channel:
        signup["channel"] = channel
    return event(
        "muster",
        phase(
            "main",
            announce("The muster begins"),
            signup_step(
                **({"channel": "announcements", "content": "Who is in? {attendee_count} so far"} | params)
            ),
            wait(60),
        ),
        title="Muster",
        signup=signup,
    )


async def book(sim: Sim, key: str, in_seconds: float = 60) -> int:
    async with sim.engine.begin() as conn:
        current = await catalog.current(conn, key, catalog.VersionCache())
        starts = sim.now() + dt.timedelta(seconds=in_seconds)
        run_id = await catalog.create_run(conn, current, "", starts, sim.now(), actor=Actor(None, "test"))
    assert run_id is not None
    return run_id


async def join(sim: Sim, run_id: int, member: Any, option: str = "going") -> object:
    return await signups.join(sim.engine, run_id, str(member.id), member.name, option, (), sim.now())


def signup_posts(sim: Sim) -> list[Any]:
    return [
        r
        for r in sim.posts_to(sim.announcements)
        if (r.json.get("embeds") or [{}])[0].get("title") == "Sign-ups: Muster"
    ]


async def message_rows(sim: Sim) -> list[sa.RowMapping]:
    async with sim.engine.connect() as conn:
        return list((await conn.execute(sa.select(signup_messages_table))).mappings())


async def test_the_step_posts_the_sign_up_message_with_working_buttons_and_edits(sim: Sim) -> None:
    await sim.publish(muster())
    run_id = await book(sim, "muster")
    await join(sim, run_id, sim.player)
    await sim.env.advance_time(10)
    assert signup_posts(sim) == [], "no channel in signup: the booking posts nothing"

    await sim.env.advance_time(60)
    (post,) = signup_posts(sim)
    assert post.json["content"] == "Who is in? 1 so far"
    assert post.json["nonce"] == f"signup{run_id}"
    assert post.json["allowed_mentions"] == {"parse": []}, "it pings nobody"
    message = sim.announcements.last_message
    assert buttons(message) == [
        ("going", f"signup:{run_id}:going", False),
        ("Leave", f"signup:{run_id}:~leave", False),
    ], "posted after the start, and open: closes: end takes sign-ups while the run is in flight"
    assert message.embeds[0].fields[0].value == f"<@{sim.player.id}>"
    assert "Sign-ups stay open until the event ends." in message.embeds[0].description
    joined = await sim.gm.click(message, label="going")
    assert joined.ephemeral and joined.response.content.startswith("✅"), joined.response.content
    await sim.env.advance_time(6)
    assert sim.announcements.last_message.embeds[0].fields[0].value == f"<@{sim.player.id}>, <@{sim.gm.id}>"
    (row,) = await message_rows(sim)
    assert (row["channel_id"], row["message_id"]) == (str(sim.announcements.id), str(message.id))
    run = await sim.run(run_id)
    assert run.phases[0].steps[1].status == "done"

    left = await sim.player.click(message, label="Leave")
    assert left.ephemeral and left.response.content == "You are no longer signed up (going)."
    await sim.env.advance_time(6)
    edited = sim.announcements.last_message
    assert edited.id == message.id and edited.embeds[0].fields[0].value == f"<@{sim.gm.id}>"
    assert edited.content == "Who is in? 1 so far", "an edit keeps the step's words"
    assert len(signup_posts(sim)) == 1


async def test_defect_a_restart_after_the_claim_before_the_post_posts_one_message(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step claims the run's row, then its process dies before the post; the retry, in a
    restarted bot, takes its own claim back and posts, once."""
    await sim.publish(muster())
    original = SignupMessages._post

    async def dies_before_posting(self: SignupMessages, *args: Any) -> None:
        raise RuntimeError("the process died before posting the sign-up message")

    monkeypatch.setattr(SignupMessages, "_post", dies_before_posting)
    await sim.mod.slash(sim.staff, "event start", definition="muster")
    (row,) = await message_rows(sim)
    assert row["message_id"] is None and row["claimed_by"].startswith("step ")
    assert signup_posts(sim) == []
    run = await sim.only_run()
    assert run.phases[0].steps[1].status == "pending", "to be retried"

    monkeypatch.setattr(SignupMessages, "_post", original)
    await sim.start_bot()
    await sim.env.advance_time(30)
    (post,) = signup_posts(sim)
    assert post.json["content"] == "Who is in? 0 so far", "posted by the step's retry"
    (row,) = await message_rows(sim)
    assert row["message_id"] == str(sim.announcements.last_message.id)
    run = await sim.only_run()
    assert run.phases[0].steps[1].status == "done"


async def test_defect_a_restart_after_the_post_before_the_step_ended_posts_no_second(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message is posted and its id stored, then the process dies before the step is
    marked done; the retry finds the run's message and posts nothing."""
    await sim.publish(muster())
    original = signup_messages.message_posted

    async def posted_then_dies(*args: Any, **kwargs: Any) -> None:
        await original(*args, **kwargs)
        raise RuntimeError("the process died after storing the message, before the step ended")

    monkeypatch.setattr(signup_messages, "message_posted", posted_then_dies)
    await sim.mod.slash(sim.staff, "event start", definition="muster")
    assert len(signup_posts(sim)) == 1
    run = await sim.only_run()
    assert run.phases[0].steps[1].status == "pending", "to be retried"

    monkeypatch.setattr(signup_messages, "message_posted", original)
    await sim.start_bot()
    await sim.env.advance_time(30)
    assert len(signup_posts(sim)) == 1, "the retry found the run's message"
    run = await sim.only_run()
    assert run.phases[0].steps[1].status == "done"
    assert run.phases[0].steps[1].result["created"] is False


async def test_a_run_whose_message_went_up_at_booking_gets_none_from_the_step(sim: Sim) -> None:
    await sim.publish(muster("announcements"))
    run_id = await book(sim, "muster")
    await sim.env.advance_time(10)
    (booked,) = signup_posts(sim)
    assert "content" not in booked.json or not booked.json["content"]

    await sim.env.advance_time(60)
    run = await sim.run(run_id)
    signup = run.phases[0].steps[1]
    assert signup.status == "done"
    assert signup.result["created"] is False
    assert signup.result["posted"]["message_id"] == str(sim.announcements.history()[0].id)
    assert len(signup_posts(sim)) == 1, "one message per run"
    assert len(await message_rows(sim)) == 1


async def test_a_cue_with_ping_attendees_pings_the_confirmed_not_the_waiting(sim: Sim) -> None:
    await sim.publish(
        event(
            "briefing",
            phase("main", cue("Brief the attendees", ping="attendees", ping_role="gm")),
            title="Briefing",
            signup={"options": {"going": 2}, "channel": "general"},
        )
    )
    run_id = await book(sim, "briefing")
    waiting = sim.guild.add_member(sim.env.create_user("latecomer"))
    for member in (sim.player, sim.mod, waiting):
        await join(sim, run_id, member)
    await sim.env.advance_time(70)

    (post,) = sim.posts_to(sim.gm_cues)
    gm_role = sim.roles["gm"].id
    confirmed = [sim.player.id, sim.mod.id]
    assert post.json["content"] == f"<@&{gm_role}> <@{sim.player.id}> <@{sim.mod.id}>"
    assert post.json["allowed_mentions"] == {"parse": [], "roles": [gm_role], "users": confirmed}
    message = sim.gm_cues.last_message
    assert sorted(message.raw_mentions) == sorted(confirmed)
    assert waiting.id not in message.raw_mentions


async def test_preflight_checks_the_channel_the_step_posts_in(sim: Sim) -> None:
    """With no channel of its own the step posts in the sign-up's: that channel is checked
    before the start, as an announcement's is, and the start refused."""
    spec = muster("nowhere")
    spec["phases"][0]["steps"][1]["params"].pop("channel")
    await sim.publish(spec)
    result = await sim.mod.slash(sim.staff, "event start", definition="muster")
    text = result.response.embeds[0].description or ""
    assert "phase 'main', 2nd step: channel 'nowhere' is not one of the channel aliases in config" in text, (
        text
    )
    assert signup_posts(sim) == []
    assert sim.announcements.history() == [], "nothing started"
