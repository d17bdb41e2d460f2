"""Issue 28 items 2 and 3 with two bot processes on one database (``tests.bot.two_processes``):
``/event move-date`` delivered to both is handled once (one new version, the run moved once,
one staff-log line), and a sign-up message waiting for ``signup.opens`` is posted once."""

from __future__ import annotations

import datetime as dt
import random

from runner.history import entries_for_run
from runner.sql import definitions as definitions_sql
from runner.views import list_runs
from tests.bot.conftest import TICK
from tests.bot.test_signup_opens import book, signup_posts
from tests.bot.test_skip_and_move_dates import booked, first_start
from tests.bot.two_processes import PACE, Pair, Timing, assert_each_once, handled_once, staff_lines


async def test_move_date_delivered_to_both_processes_moves_the_run_once(pair: Pair, timing: Timing) -> None:
    sim = pair.sim
    run_id = await booked(sim)
    a, b = sim.bot, await pair.join("process-b", sim.config)
    start = first_start(sim)
    order = random.Random(28)
    for hours in (1, 2):
        pair.hears_first(order.choice((a, b)))
        to = start + dt.timedelta(hours=hours)
        answered = await sim.mod.slash(
            sim.staff, "event move-date", event="nightly", date=f"{start:%Y-%m-%d}", to=f"{to:%Y-%m-%d %H:%M}"
        )
        assert answered.acknowledged
        await handled_once(pair, timing, (a, b))
        await sim.env.advance_time(PACE)
    await sim.env.advance_time(2 * TICK)

    runs = [r for r in await list_runs(sim.engine) if r.scheduled_for.date() == start.date()]
    assert [(r.id, r.scheduled_for) for r in runs] == [(run_id, start + dt.timedelta(hours=2))]
    async with sim.engine.connect() as conn:
        moves = [e for e in await entries_for_run(conn, run_id) if e.event.kind == "run.moved"]
    assert len(moves) == 2, "one line per move, not one per process"
    async with sim.engine.connect() as conn:
        row = await definitions_sql.by_key(conn, "nightly")
        assert row is not None
        history = await definitions_sql.version_history(conn, int(row["id"]))
    assert len(history) == 3, "each command published one version"
    lines = staff_lines(sim)
    assert len([line for line in lines if "now starts" in line]) == 2, lines
    assert len([line for line in lines if "occurrence to <t:" in line]) == 2, lines
    assert_each_once(lines)


async def test_a_signup_message_waiting_for_opens_is_posted_once_by_two_processes(pair: Pair) -> None:
    sim = pair.sim
    await pair.join("process-b", sim.config)
    await book(sim, opens="2h59m")
    await sim.env.advance_time(2 * TICK)
    assert signup_posts(sim) == []
    await sim.env.advance_time(60 + 4 * TICK)
    assert len(signup_posts(sim)) == 1
