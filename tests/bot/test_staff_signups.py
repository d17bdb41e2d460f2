"""Staff manage sign-ups from Discord (issue 28 item 3): ``/event signups list|add|move|remove|
close|reopen`` and the Close/Reopen and Export buttons under the staff's list. Each change obeys
the database's rules as a click does, is answered ephemerally, posts a staff-log line naming who
did it, and updates the sign-up message; a member without the ``signups`` capability changes
nothing. Every request is held to Discord's OpenAPI description by the simcord plugin."""

from __future__ import annotations

from typing import Any

import simcord

from bot.errors import BotError
from runner import signups
from tests.bot.conftest import Sim, buttons, make_config
from tests.bot.test_live_messages import text_of
from tests.bot.test_signups import book, field_values, message_of


def answered(result: Any) -> Any:
    return [m for m in [result.response, *result.followups] if m is not None][-1]


def staff_lines(sim: Sim) -> list[str]:
    return [line for m in sim.staff_log.history() if not m.embeds for line in m.content.splitlines()]


async def with_signups_capability(sim: Sim) -> None:
    config = make_config(sim.guild, sim.channels, sim.roles)
    config = config.model_copy(update={"permissions": config.permissions | {"signups": ["moderator"]}})
    sim.config = config
    await sim.start_bot(config)


async def test_staff_add_move_and_remove_follow_the_rules_and_the_staff_log_names_who(sim: Sim) -> None:
    await with_signups_capability(sim)
    run_id = await book(sim)
    message = message_of(sim)
    await sim.gm.click(message, label="tank")  # the one tank seat
    result = await sim.mod.slash(sim.staff, "event signups add", run=run_id, member=sim.player, option="tank")
    reply = answered(result)
    assert (
        reply.ephemeral and reply.content == f"⏳ tank is full: <@{sim.player.id}> is #1 on its waiting list."
    )
    # Moving the GM to dps frees the tank seat: the player waiting for it gets it, once.
    result = await sim.mod.slash(sim.staff, "event signups move", run=run_id, member=sim.gm, option="dps")
    assert answered(result).content == (
        f"✅ <@{sim.gm.id}> moved from tank to dps. <@{sim.player.id}> got the tank seat from the waiting list."
    )
    result = await sim.mod.slash(sim.staff, "event signups remove", run=run_id, member=sim.gm)
    assert answered(result).content == f"➖ <@{sim.gm.id}> was removed from dps."
    listed = await signups.listing(sim.engine, run_id)
    assert listed is not None and [(s.member_id, s.option) for s in listed.confirmed] == [
        (str(sim.player.id), "tank")
    ]
    await sim.env.advance_time(6)
    fields = field_values(message_of(sim))
    assert fields["tank (1/1)"] == f"<@{sim.player.id}>" and fields["dps (0/2)"] == "nobody yet"
    lines = staff_lines(sim)
    by = f"by <@{sim.mod.id}>"
    assert any(f"<@{sim.player.id}> added to the tank waiting list {by}" in line for line in lines), lines
    assert any(f"<@{sim.gm.id}> moved from tank to dps {by}" in line for line in lines), lines
    assert any(f"<@{sim.player.id}> got a tank seat from the waiting list" in line for line in lines), lines
    assert any(f"<@{sim.gm.id}> removed from dps {by}" in line for line in lines), lines


async def test_close_refuses_clicks_and_reopen_takes_them_with_the_buttons_under_the_staff_list(
    sim: Sim,
) -> None:
    await with_signups_capability(sim)
    run_id = await book(sim)
    result = await sim.mod.slash(sim.staff, "event signups list", run=run_id)
    staff_list = answered(result)
    assert staff_list.ephemeral and "🔓 Open; closes" in text_of(staff_list)
    assert [(b["label"], b["custom_id"]) for row in staff_list.components for b in row["components"]] == [
        ("Close sign-ups", f"evsu:{run_id}:close"),
        ("Export CSV", f"evsu:{run_id}:export"),
    ]
    closed = await sim.mod.click(staff_list, label="Close sign-ups")
    assert answered(closed).content == f"🔒 Sign-ups of run {run_id} are closed."
    await sim.env.advance_time(6)
    # The message follows: its option buttons are disabled (a click is refused by the database
    # too: tests/signups/test_signup_staff.py).
    assert "Sign-ups are closed." in (message_of(sim).embeds[0].description or "")
    assert all(disabled for label, _, disabled in buttons(message_of(sim)) if label != "Leave")
    reopened = await sim.mod.slash(sim.staff, "event signups reopen", run=run_id)
    assert "open again until the run ends" in answered(reopened).content
    await sim.env.advance_time(6)
    click = await sim.player.click(message_of(sim), label="tank")
    assert answered(click).content == "✅ You are signed up: tank."
    lines = staff_lines(sim)
    assert any(f"sign-ups closed by <@{sim.mod.id}>" in line for line in lines), lines
    assert any(f"sign-ups reopened by <@{sim.mod.id}> until the run ends" in line for line in lines), lines
    exported = await sim.mod.click(staff_list, label="Export CSV")
    [file] = answered(exported).attachments
    assert file.filename == f"signups-run-{run_id}.csv"


async def test_a_member_without_the_signups_capability_changes_nothing(sim: Sim) -> None:
    await with_signups_capability(sim)
    run_id = await book(sim)
    before = await signups.listing(sim.engine, run_id)
    for actor in (sim.gm, sim.player):
        result = await actor.slash(sim.staff, "event signups add", run=run_id, member=actor, option="tank")
        reply = answered(result)
        assert reply.ephemeral and "Nothing was done." in reply.content
        result = await actor.slash(sim.staff, "event signups close", run=run_id)
        assert "Nothing was done." in answered(result).content
    assert await signups.listing(sim.engine, run_id) == before
    click = await sim.player.click(message_of(sim), label="tank")
    assert answered(click).content == "✅ You are signed up: tank."


async def test_staff_tools_on_a_run_without_sign_ups_are_refused_in_words(sim: Sim) -> None:
    await with_signups_capability(sim)
    result = await sim.mod.slash(sim.staff, "event signups list", run=999)
    assert "has no sign-up list" in answered(result).content
    simcord.assert_error(sim.env, BotError)
    result = await sim.mod.slash(sim.staff, "event signups close", run=999)
    assert "no sign-up" in answered(result).content.lower()
