"""``signup.opens`` (issue 28 item 3): the sign-up message is posted that long before the
start, not when the run is booked; left out, it is posted at booking as before. Through the
real bot in simcord."""

from __future__ import annotations

import datetime as dt

from runner import catalog
from runner.history import Actor
from tests.bot.conftest import TICK, Sim
from tests.bot.test_signups import signup_spec

STARTS_IN = dt.timedelta(hours=3)


async def book(sim: Sim, **signup: object) -> int:
    with sim.env.time_context():
        await sim.publish(signup_spec(**signup))
        async with sim.engine.begin() as conn:
            current = await catalog.current(conn, "raid-night", catalog.VersionCache())
            run_id = await catalog.create_run(
                conn, current, "", sim.now() + STARTS_IN, sim.now(), actor=Actor(None, "test")
            )
    assert run_id is not None
    return run_id


def signup_posts(sim: Sim) -> list[object]:
    return [
        m
        for m in sim.announcements.history()
        if m.embeds and (m.embeds[0].title or "").startswith("Sign-ups:")
    ]


async def test_the_message_waits_for_opens_then_is_posted_once(sim: Sim) -> None:
    run_id = await book(sim, opens="2h59m")
    await sim.env.advance_time(2 * TICK)
    assert signup_posts(sim) == [], "booked three hours ahead: sign-ups open a minute later"

    await sim.env.advance_time(60 + 2 * TICK)
    (message,) = signup_posts(sim)
    assert f"signup:{run_id}:tank" in str(message.components)  # type: ignore[attr-defined]
    await sim.env.advance_time(4 * TICK)
    assert len(signup_posts(sim)) == 1


async def test_without_opens_the_message_is_posted_at_booking(sim: Sim) -> None:
    await book(sim)
    await sim.env.advance_time(2 * TICK)
    assert len(signup_posts(sim)) == 1
