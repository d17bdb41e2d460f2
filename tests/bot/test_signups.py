"""Sign-ups in Discord, through simcord (every request held to Discord's OpenAPI description by
the plugin): the message posted at booking with a button per option and Leave, a click answered
ephemerally with what the database decided, the list edited (coalesced: at most one edit per
5 s however many click), a click after closing time, a restart keeping the buttons working, and
a promotion's notice by DM, or by a mention when the member's DMs are closed."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from typing import Any

import simcord

from bot.cogs.live._loop import EDIT_GAP
from bridge import signup_messages
from runner import catalog, signups
from runner.history import Actor
from tests.bot.conftest import Sim, buttons
from tests.bot.test_live_messages import field, live_edits, text_of, the_live_message
from tests.support.definitions import event, phase, wait

STARTS_IN = dt.timedelta(hours=3)


def signup_spec(**signup: Any) -> dict[str, Any]:
    return event(
        "raid-night",
        phase("main", wait("1m")),
        title="Raid Night",
        signup={"channel": "announcements", "options": {"tank": 1, "dps": 2}, "closes": "1h", **signup},
    )


async def book(sim: Sim, spec: dict[str, Any] | None = None, *, starts_in: dt.timedelta = STARTS_IN) -> int:
    """Publish the event and book a run three hours from now; the loop posts its message."""
    with sim.env.time_context():
        await sim.publish(spec or signup_spec())
        async with sim.engine.begin() as conn:
            current = await catalog.current(conn, "raid-night", catalog.VersionCache())
            run_id = await catalog.create_run(
                conn, current, "", sim.now() + starts_in, sim.now(), actor=Actor(None, "test")
            )
    assert run_id is not None
    await sim.env.advance_time(6)
    return run_id


def message_of(sim: Sim) -> Any:
    message = sim.announcements.last_message
    assert message is not None and message.embeds and message.embeds[0].title == "Sign-ups: Raid Night"
    return message


def field_values(message: Any) -> dict[str, str]:
    return {f.name: f.value for f in message.embeds[0].fields}


def edits(sim: Sim, message: Any) -> list[simcord.HttpLogEntry]:
    return sim.requests("PATCH", f"/channels/{sim.announcements.id}/messages/{message.id}")


async def test_the_message_is_posted_at_booking_with_a_button_per_option_and_leave(sim: Sim) -> None:
    run_id = await book(sim)
    message = message_of(sim)
    assert buttons(message) == [
        ("tank", f"signup:{run_id}:tank", False),
        ("dps", f"signup:{run_id}:dps", False),
        ("Leave", f"signup:{run_id}:~leave", False),
    ]
    assert field_values(message) == {"tank (0/1)": "nobody yet", "dps (0/2)": "nobody yet"}
    await sim.env.advance_time(30)
    assert len(sim.posts_to(sim.announcements)) == 1, "one message per run, posted once"


async def test_a_click_is_answered_ephemerally_and_the_list_is_edited(sim: Sim) -> None:
    await book(sim)
    message = message_of(sim)
    clicked = await sim.player.click(message, label="tank")
    assert clicked.acknowledged and clicked.ephemeral
    assert clicked.response.content == "✅ You are signed up: tank."
    second = await sim.gm.click(message, label="tank")
    assert second.response.content.startswith("⏳ tank is full: you are #1 on its waiting list.")
    await sim.env.advance_time(6)
    shown = field_values(sim.announcements.last_message)
    assert shown["tank (1/1)"] == f"<@{sim.player.id}>\nWaiting (1): <@{sim.gm.id}>"
    left = await sim.player.click(sim.announcements.last_message, label="Leave")
    assert left.response.content == "You are no longer signed up (tank)."
    await sim.env.advance_time(6)
    assert field_values(sim.announcements.last_message)["tank (1/1)"] == f"<@{sim.gm.id}>"
    # The member promoted is told so, by a direct message.
    dms = [r for r in sim.env.http_requests if r.method == "POST" and r.path == "/users/@me/channels"]
    assert len(dms) == 1
    run_id = (await signup_messages.open_messages(sim.engine))[0].run_id
    async with sim.engine.connect() as conn:
        (notice,) = await signup_messages.sql.notices_for_run(conn, run_id)
    assert (notice["member_id"], notice["delivered_via"]) == (str(sim.gm.id), "dm")


async def test_many_clicks_at_once_are_one_edit_per_five_seconds(sim: Sim) -> None:
    await book(sim, signup_spec(options=["going"]))
    message = message_of(sim)
    members = [sim.guild.add_member(sim.env.create_user(f"raider{n}")) for n in range(12)]
    before = len(edits(sim, message))
    for member in members:
        answered = await member.click(message, label="going")
        assert answered.acknowledged and answered.ephemeral
    # Sampled each virtual second: the seconds at which an edit went out.
    edited_at: list[int] = []
    for second in range(1, 16):
        count = len(edits(sim, message))
        await sim.env.advance_time(1)
        if len(edits(sim, message)) > count:
            edited_at.append(second)
    assert len(edits(sim, message)) - before == len(edited_at) >= 1
    # 5 s apart at least (a second's sampling can make it look 4).
    assert all(b - a >= 4 for a, b in itertools.pairwise(edited_at)), edited_at
    assert field_values(sim.announcements.last_message)["going (12)"].count("<@") == 12


async def test_after_closing_time_a_click_is_answered_sign_ups_are_closed(sim: Sim) -> None:
    # Sign-ups close an hour before the start: 20 s after booking.
    await book(sim, starts_in=dt.timedelta(hours=1, seconds=26))
    open_message = sim.announcements.last_message
    assert not buttons(open_message)[0][2]
    # A member whose client still shows the buttons enabled (the edit has not reached them).
    await sim.bot.signup_messages.loop.stop()
    await sim.env.advance_time(30)
    clicked = await sim.player.click(open_message, label="tank")
    assert clicked.ephemeral and clicked.response.content == "Sign-ups are closed."
    sim.bot.signup_messages.start()
    await sim.env.advance_time(6)
    message = sim.announcements.last_message
    assert "Sign-ups are closed." in message.embeds[0].description
    assert [disabled for _, _, disabled in buttons(message)] == [True, True, False]


async def test_a_restarted_bot_answers_a_click_on_the_message_posted_before(sim: Sim) -> None:
    await book(sim)
    message = message_of(sim)
    with sim.env.time_context():
        await sim.start_bot()
    clicked = await sim.player.click(message, label="dps")
    assert clicked.acknowledged
    assert clicked.response.content == "✅ You are signed up: dps."


async def test_a_member_whose_dms_are_closed_is_mentioned_where_the_sign_up_is(sim: Sim) -> None:
    await book(sim)
    message = message_of(sim)
    # simcord refuses a DM to a bot account with Discord's 50007, as Discord does closed DMs.
    closed = sim.guild.add_member(sim.env.create_user("closed-dms", bot=True))
    await sim.player.click(message, label="tank")
    await closed.click(message, label="tank")
    await sim.player.click(message, label="Leave")
    await sim.env.advance_time(6)
    mentions = [m for m in sim.announcements.history() if m.content.startswith(f"<@{closed.id}>")]
    assert len(mentions) == 1 and "A seat freed up" in mentions[0].content


async def test_event_status_shows_the_sign_up_counts(sim: Sim) -> None:
    run_id = await book(sim)
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")
    result = await sim.mod.slash(sim.staff, "event status", run=run_id)
    (embed,) = result.response.embeds
    field = embed.fields[0]
    assert (field.name, field.value) == ("Sign-ups", "tank 1/1 (1 waiting) · dps 0/2 · 1 signed up")


async def test_the_attendee_role_follows_the_seat(sim: Sim) -> None:
    await book(sim, signup_spec(attendee_role="players"))
    message = message_of(sim)
    role = sim.roles["players"].id

    def role_requests(method: str, member: Any) -> list[simcord.HttpLogEntry]:
        return sim.requests(method, f"/guilds/{sim.guild.id}/members/{member.id}/roles/{role}")

    await sim.mod.click(message, label="tank")
    waiting = await sim.gm.click(message, label="tank")
    assert waiting.response.content.startswith("⏳"), "a member waiting gets no role"
    assert (len(role_requests("PUT", sim.mod)), len(role_requests("PUT", sim.gm))) == (1, 0)
    await sim.mod.click(message, label="Leave")
    await sim.env.advance_time(6)
    assert len(role_requests("DELETE", sim.mod)) == 1
    assert len(role_requests("PUT", sim.gm)) == 1, "given with the promotion"


async def test_the_live_run_message_shows_the_counts_and_a_click_edits_it(sim: Sim) -> None:
    """Staff watching the staff channel see the sign-up counts on the run's live message, and a
    click (which writes no run-log line) brings it up to date, coalesced like any other edit."""
    spec = event(
        "raid-night",
        phase("main", wait("10m")),
        title="Raid Night",
        signup={"channel": "announcements", "options": {"tank": 1, "dps": 2}, "closes": "1m"},
    )
    await book(sim, spec, starts_in=dt.timedelta(minutes=2))
    message = message_of(sim)
    waiting = [sim.guild.add_member(sim.env.create_user(f"reserve{n}")) for n in range(4)]
    await sim.player.click(message, label="tank")
    await sim.mod.click(message, label="dps")
    for member in waiting:
        answered = await member.click(message, label="tank")
        assert answered.response.content.startswith("⏳ tank is full")
    await sim.env.advance_time(120)  # the run starts: its live message is posted
    live = the_live_message(sim)
    assert "Status: **running**" in text_of(live)
    assert field(live, "Sign-ups") == "tank 1/1 (4 waiting) · dps 1/2 · 2 signed up"

    await sim.env.advance_time(2 * EDIT_GAP)
    before = len(live_edits(sim, live.id))
    left = await waiting[0].click(message, label="Leave")
    assert left.response.content == "You left the tank waiting list."
    await sim.env.advance_time(EDIT_GAP)
    assert field(the_live_message(sim), "Sign-ups") == "tank 1/1 (3 waiting) · dps 1/2 · 2 signed up"
    assert len(live_edits(sim, live.id)) == before + 1, "the click, and only the click, edited it"

    # The rest leave in a burst: the first is shown at once, the others together one EDIT_GAP
    # later (never two edits closer than that), showing the end state.
    burst = len(live_edits(sim, live.id))
    for member in waiting[1:]:
        await member.click(message, label="Leave")
    edited_at = [0] if len(live_edits(sim, live.id)) > burst else []
    for second in range(1, 3 * int(EDIT_GAP)):
        count = len(live_edits(sim, live.id))
        await sim.env.advance_time(1)
        if len(live_edits(sim, live.id)) > count:
            edited_at.append(second)
    assert 1 <= len(edited_at) <= 2, edited_at
    assert all(b - a >= EDIT_GAP - 1 for a, b in itertools.pairwise(edited_at)), edited_at
    assert field(the_live_message(sim), "Sign-ups") == "tank 1/1 · dps 1/2 · 2 signed up"
    settled = len(live_edits(sim, live.id))
    await sim.env.advance_time(3 * EDIT_GAP)
    assert len(live_edits(sim, live.id)) == settled, "nothing moved: no edit"


async def test_defect_promotions_and_late_cancels_never_reached_the_staff_log(sim: Sim) -> None:
    """docs/signups.md promises staff a line for each promotion and each late cancel; the run log
    had them (``signup.promoted``, ``signup.late_cancel``) but the staff log left them out."""
    await book(sim, signup_spec(late_cancel="6h"))
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")
    await sim.player.click(message, label="Leave")
    await sim.env.advance_time(12)
    lines = [m.content for m in sim.staff_log.history()]
    promoted = [line for line in lines if "seat from the waiting list" in line]
    late = [line for line in lines if "late cancel" in line]
    assert len(promoted) == 1 and f"<@{sim.gm.id}> got a tank seat" in promoted[0], lines
    assert len(late) == 1 and f"<@{sim.player.id}> (tank) left" in late[0], lines


async def test_defect_two_aliases_for_one_role_refused_a_member_who_holds_it(sim: Sim) -> None:
    """``roles: {players: X, raiders: X}``: the click kept one alias per role id (the last), so a
    sign-up allowing ``players`` refused a member holding X."""
    from tests.bot.conftest import make_config

    config = make_config(sim.guild, sim.channels, {**sim.roles, "raiders": sim.roles["players"]})
    assert list(config.roles)[-1] == "raiders", "the alias a one-per-id map would keep"
    with sim.env.time_context():
        await sim.start_bot(config)
    await book(sim, signup_spec(roles=["players"]))
    clicked = await sim.player.click(message_of(sim), label="tank")
    assert clicked.response.content == "✅ You are signed up: tank."


async def test_defect_a_full_event_was_answered_as_a_full_option(sim: Sim) -> None:
    """With the overall capacity taken and the option not, the answer said "dps is full" while
    the message showed ``dps (1/3)``: it is the event that is full."""
    await book(sim, signup_spec(options={"tank": 1, "dps": 3}, capacity=2))
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="dps")
    third = await sim.mod.click(message, label="dps")
    assert third.response.content == (
        "⏳ The event is full: you are #1 on the dps waiting list. You will get a message if a seat frees up."
    )
    await sim.env.advance_time(6)
    assert "dps (1/3)" in field_values(sim.announcements.last_message)


async def test_defect_a_press_naming_another_run_in_its_custom_id_was_trusted(sim: Sim) -> None:
    """The custom id is written by the client: a press on one run's sign-up message whose custom
    id names another run signed the member up to that other run. It is refused, nothing changed."""
    from simcord.actors import _visible_message

    first = await book(sim)
    first_message = message_of(sim)
    second = await book(sim, starts_in=STARTS_IN + dt.timedelta(days=1))
    assert second != first
    # discord.py dispatches a press only to a component the message carries, so the forgery is
    # a message carrying a button that names the other run (as simcord stores the message).
    stored = _visible_message(sim.player, first_message)
    honest = copy.deepcopy(stored.components)
    for row in stored.components:
        for component in row["components"]:
            component["custom_id"] = component["custom_id"].replace(f"signup:{first}:", f"signup:{second}:")
    answered = await sim.player.click(first_message, label="tank")
    assert (
        answered.response.content
        == "This button does not belong to this run's sign-up message; nothing was done."
    )
    async with sim.engine.connect() as conn:
        assert await signups.sql.for_run(conn, second) == []
        assert await signups.sql.for_run(conn, first) == []
    stored.components[:] = honest
    pressed = await sim.player.click(first_message, label="tank")
    assert pressed.response.content == "✅ You are signed up: tank."


async def test_defect_a_member_who_left_the_server_kept_their_seat_while_others_waited(sim: Sim) -> None:
    from bot.cogs.signups._departures import CHECK_EVERY

    run_id = await book(sim)
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")
    await sim.env.advance_time(6)
    sim.guild.remove_member(sim.player)
    await sim.env.advance_time(CHECK_EVERY + 30)
    async with sim.engine.connect() as conn:
        listed = {r["member_id"]: r["status"] for r in await signups.sql.for_run(conn, run_id)}
        notices = await signup_messages.sql.notices_for_run(conn, run_id)
    assert listed == {str(sim.gm.id): "confirmed"}
    assert [n["member_id"] for n in notices] == [str(sim.gm.id)], "promoted once, and told"
    assert field_values(sim.announcements.last_message)["tank (1/1)"] == f"<@{sim.gm.id}>"


async def test_defect_a_member_who_left_while_the_bot_was_offline_is_taken_off_at_the_next_pass(
    sim: Sim,
) -> None:
    run_id = await book(sim)
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")

    def member_checks() -> int:
        return len([r for r in sim.env.http_requests if r.method == "GET" and "/members/" in r.path])

    await sim.env.advance_time(6)
    sim.guild.remove_member(sim.player)
    before = member_checks()
    with sim.env.time_context():
        await sim.start_bot()
    await sim.env.advance_time(12)
    async with sim.engine.connect() as conn:
        listed = {r["member_id"]: r["status"] for r in await signups.sql.for_run(conn, run_id)}
    assert listed == {str(sim.gm.id): "confirmed"}
    await sim.env.advance_time(120)
    assert member_checks() - before == 2, "one check per member on the list, not one per pass"
