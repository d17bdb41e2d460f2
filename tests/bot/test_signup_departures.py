"""Members who leave the server leave their sign-up lists (``bot.cogs.signups._departures``):
with two bot processes a departure promotes once, and a refusal that is not about the member
frees nobody's seat. The one-process cases (online, and while the bot was offline) are in
``tests/bot/test_signups.py``."""

from __future__ import annotations

import asyncio

from bot.cogs.signups._departures import CHECK_EVERY, MemberDepartures
from bridge import signup_messages
from runner import history, signups
from tests.bot.conftest import Sim
from tests.bot.test_signups import book, field_values, message_of
from tests.bot.two_processes import Pair


async def listed(sim: Sim, run_id: int) -> dict[str, str]:
    async with sim.engine.connect() as conn:
        return {r["member_id"]: r["status"] for r in await signups.sql.for_run(conn, run_id)}


async def promotions(sim: Sim, run_id: int) -> list[str]:
    async with sim.engine.connect() as conn:
        entries = await history.entries_for_run(conn, run_id)
    return [e.event.member_id for e in entries if isinstance(e.event, history.SignupPromoted)]


async def test_defect_a_member_who_left_the_server_is_promoted_past_once_with_two_processes(
    pair: Pair,
) -> None:
    """Both processes find a seated member gone at the same moment (as when the sign-up lease
    moves and the new holder, with no memory of whom it asked, asks about everyone): each takes
    the member off by the click's own leave, so the database promotes the first waiting once:
    one promotion, one notice, one direct message, one staff-log line. (Two real connections
    racing on MariaDB: ``tests/signups/test_signup_races.py``.)"""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    run_id = await book(sim)
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")
    await sim.env.advance_time(6)

    def checks() -> int:
        return len(
            [r for r in sim.env.http_requests if r.method == "GET" and f"/members/{sim.player.id}" in r.path]
        )

    sim.guild.remove_member(sim.player)
    before = checks()
    both = [MemberDepartures(bot.kit, bot.services.signups) for bot in (a, b)]
    with sim.env._bot_scope():
        await asyncio.gather(*(departures.check_some() for departures in both))
    assert checks() == before + 2, "each process asked about the member and found them gone"
    await sim.env.advance_time(CHECK_EVERY + 30)

    assert await listed(sim, run_id) == {str(sim.gm.id): "confirmed"}
    assert await promotions(sim, run_id) == [str(sim.gm.id)]
    async with sim.engine.connect() as conn:
        notices = await signup_messages.sql.notices_for_run(conn, run_id)
    assert [n["member_id"] for n in notices] == [str(sim.gm.id)]
    dms = [r for r in sim.env.http_requests if r.method == "POST" and r.path == "/users/@me/channels"]
    assert len(dms) == 1
    lines = [m.content for m in sim.staff_log.history() if "seat from the waiting list" in m.content]
    assert len(lines) == 1, lines
    assert field_values(sim.announcements.last_message)["tank (1/1)"] == f"<@{sim.gm.id}>"


async def test_defect_a_not_found_that_is_not_about_the_member_freed_their_seat(sim: Sim) -> None:
    """Any 404 was read as "the member left": a 404 with another code (an unknown guild, from a
    proxy or a Discord hiccup) would have emptied every list. Only 10007 Unknown Member (and
    10013 Unknown User) take a member off; anything else pauses the checks."""
    run_id = await book(sim)
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")
    sim.env.inject_error(
        "GET",
        f"/guilds/{sim.guild.id}/members/*",
        status=404,
        code=10004,
        message="Unknown Guild",
        times=None,
    )
    await sim.env.advance_time(CHECK_EVERY + 30)
    assert await listed(sim, run_id) == {str(sim.player.id): "confirmed", str(sim.gm.id): "waitlisted"}
    assert await promotions(sim, run_id) == []
