"""The process-wide guard on Discord's invalid-request limit (``bot.invalid_requests``), through
the real bot in simcord: Discord bans the IP at 10,000 answers of 401, 403 or 429 in 10 minutes,
so past the bot's own budget the background loops pause, ``/event health`` says so and the
staff log says so once when it trips and once when it clears."""

from __future__ import annotations

import simcord

from bot.invalid_requests import WINDOW_SECONDS
from tests.bot.conftest import Sim, make_config
from tests.bot.test_signups import book, message_of, signup_spec

BUDGET = 10
MEMBERS = 12
MINUTES = 30


def refused(sim: Sim) -> list[simcord.HttpLogEntry]:
    return [r for r in sim.env.http_requests if r.path.startswith(f"/guilds/{sim.guild.id}/members/")]


async def test_defect_a_discord_that_refuses_everything_is_asked_no_more_than_the_budget_allows(
    sim: Sim,
) -> None:
    """Every role grant answered 429 (not final: tried again a minute later, per grant) for 12
    members over 30 minutes would be 360 refused requests; the guard keeps each 10 minutes near
    its budget, and the staff log and ``/event health`` say the loops paused."""
    config = make_config(sim.guild, sim.channels, sim.roles, invalid_request_budget=BUDGET)
    with sim.env.time_context():
        bot = await sim.start_bot(config)
    await book(sim, signup_spec(options={"going": 50}, attendee_role="players"))
    sim.env.inject_error(
        "*", f"/guilds/{sim.guild.id}/members/*", status=429, code=0, message="slow down", times=None
    )
    members = [sim.guild.add_member(sim.env.create_user(f"raider{n}")) for n in range(MEMBERS)]
    message = message_of(sim)
    for member in members:
        await member.click(message, label="going")

    worst = 0
    for _ in range(MINUTES):
        await sim.env.advance_time(60)
        worst = max(worst, bot.invalid_requests.count())
    total = len(refused(sim))
    print(
        f"refused requests over {MINUTES} simulated minutes: {total} (unguarded: {MEMBERS * MINUTES}), "
        f"worst 10-minute window {worst}, budget {BUDGET}"
    )
    assert worst <= BUDGET + MEMBERS, "a pass already under way may finish, no more"
    assert total <= (MINUTES * 60 / WINDOW_SECONDS + 1) * (BUDGET + MEMBERS)
    assert total < MEMBERS * MINUTES / 4
    notices = [m.content for m in sim.staff_log.history() if "Discord refused" in m.content]
    assert len(notices) >= 1 and "pause" in notices[0]
    health = await sim.mod.slash(sim.staff, "event health")
    (embed,) = health.response.embeds
    assert "Discord refused" in (embed.description or "")


def test_the_guard_pauses_at_the_budget_and_resumes_under_half_of_it() -> None:
    from bot.invalid_requests import InvalidRequests

    clock = [0.0]
    told: list[bool] = []
    guard = InvalidRequests(budget=4, now=lambda: clock[0])
    guard.on_change = told.append
    for status in (403, 404, 401, 500, 429):
        guard.record(status)
    assert (guard.count(), guard.backing_off) == (3, False), "404 and 500 are not counted"
    guard.record(403)
    assert guard.backing_off and told == [True]
    clock[0] = WINDOW_SECONDS - 1
    assert guard.backing_off, "the refusals are still within 10 minutes"
    clock[0] = WINDOW_SECONDS + 1
    assert not guard.backing_off and told == [True, False]
    assert guard.summary() is None
