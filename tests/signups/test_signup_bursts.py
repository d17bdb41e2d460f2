"""A burst of presses goes into the database together (``signups.join_many``, through the
desk): one lock and one commit for the lot, with the seats, places and moves a press-by-press
run of the same presses would give. Both backends."""

from __future__ import annotations

import asyncio
import random

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import signups
from runner.bus import LocalEventBus, SignupsChanged
from runner.signup_desk import SignupDesk
from tests.signups.booking import STARTS, T0, book, member

SLOTS = {"options": {"tank": 2, "healer": 2, "dps": 5}, "capacity": 7, "closes": "1h"}


def presses(seed: int, count: int) -> list[signups.Click]:
    """Members pressing options, some of them twice or more (a move, or the same option again)."""
    pick = random.Random(seed)
    return [
        signups.Click(*member(pick.randint(1, count // 2)), pick.choice(["tank", "healer", "dps"]), (), T0)
        for _ in range(count)
    ]


def shown(listed: signups.SignupList | None) -> list[tuple[str, str, str, int]]:
    assert listed is not None
    return [
        (s.member_id, s.option, s.status.value, s.position)
        for o in listed.options
        for s in o.confirmed + o.waitlisted
    ]


async def test_a_burst_decides_every_press_as_pressing_them_one_by_one_would(engine: AsyncEngine) -> None:
    for seed in range(3):
        burst_run = await book(engine, SLOTS, key=f"burst{seed}")
        one_by_one = await book(engine, SLOTS, key=f"single{seed}")
        clicks = presses(seed, 40)
        together = await signups.join_many(engine, burst_run, clicks)
        apart = [
            await signups.join(engine, one_by_one, c.member_id, c.member_name, c.option, (), T0)
            for c in clicks
        ]
        assert together == apart, f"seed {seed}"
        assert shown(await signups.listing(engine, burst_run)) == shown(
            await signups.listing(engine, one_by_one)
        )


async def test_hundreds_pressing_at_once_are_all_answered_in_click_order_with_few_list_updates(
    engine: AsyncEngine,
) -> None:
    run_id = await book(engine, {"options": {"going": 20}, "closes": "1h"})
    bus = LocalEventBus()
    changed: list[object] = []
    bus.subscribe(changed.append, [SignupsChanged])
    desk = SignupDesk(engine, bus)
    answers = await asyncio.gather(*(desk.join(run_id, *member(n), "going", (), T0) for n in range(1, 201)))
    assert sum(isinstance(a, signups.Confirmed) for a in answers) == 20
    waiting = [a for a in answers if isinstance(a, signups.Waitlisted)]
    # The line is served in the order the presses came: each place one further back.
    assert [a.place for a in waiting] == list(range(1, 181))
    assert len(changed) < 50, "the list follows once per batch, not once per press"
    listed = await signups.listing(engine, run_id)
    assert listed is not None and len(listed.confirmed) == 20 and len(listed.waitlisted) == 180
    assert listed.starts_at == STARTS
