"""The tick loop inside the bot: it cannot be stopped by an error or a database outage, it wakes
at once when nudged, and it sleeps only until the next due step."""

from __future__ import annotations

import asyncio
import logging
import sqlite3

import discord
import pytest
from sqlalchemy import event

from bot.errors import DATABASE_DOWN
from bot.ticker import WakeableLoop
from runner.engine import Runner
from tests.bot.conftest import Sim

# Real seconds before a wait for the loop is called a hang (the test then fails, not blocks).
HANG = 10.0


async def test_the_loop_survives_an_exception(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug surfacing in a tick is logged with its traceback and the loop carries on: the
    ``ext.tasks`` loop is never handed an exception (it would stop for good)."""
    ticker = sim.bot.ticker
    real_tick = Runner.tick
    calls = {"n": 0}

    async def tick_that_fails_once(self: Runner) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in a tick")
        return await real_tick(self)

    monkeypatch.setattr(Runner, "tick", tick_that_fails_once)
    await sim.env.advance_time(5)
    failure = [r for r in caplog.records if r.getMessage() == "tick failed; carrying on"]
    assert len(failure) == 1 and failure[0].exc_info is not None
    assert ticker.loop.is_running()

    await sim.env.advance_time(5)
    assert calls["n"] > 1, "the loop ticked again"
    assert len(failure) == 1, "and that tick worked"
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert len(sim.announcements.history()) == 1


async def test_the_loop_survives_a_database_outage(sim: Sim, caplog: pytest.LogCaptureFixture) -> None:
    """The database goes away: the outage is logged once, ticks back off exponentially, a cue
    press meanwhile gets a short answer and changes nothing; when the database is back, that is
    logged once and everything carries on."""
    caplog.set_level(logging.DEBUG)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    down = {"on": True}

    @event.listens_for(sim.engine.sync_engine, "before_cursor_execute")
    def outage(*args: object) -> None:
        if down["on"]:
            raise sqlite3.OperationalError("unable to open database file (simulated outage)")

    state = sim.bot.ticker.serving.state
    ticks = state.ticks
    await sim.env.advance_time(40)
    assert state.ticks == ticks, "no tick succeeded while down"
    assert 4 <= state.failures <= 7, "backed off (1, 2, 4, 8, 16 s ...) rather than every 5 s"
    assert state.outages == 1
    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert pressed.followups[0].content == DATABASE_DOWN
    assert sim.bot.ticker.loop.is_running()

    down["on"] = False
    await sim.env.advance_time(60)
    assert state.ticks > ticks
    loop_lines = [r for r in caplog.records if r.name == "runner.loop"]
    errors = [
        r for r in loop_lines if r.levelno == logging.ERROR and "database unreachable" in r.getMessage()
    ]
    backs = [r for r in loop_lines if "database reachable again" in r.getMessage()]
    assert len(errors) == 1 and len(backs) == 1, (errors, backs)

    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert pressed.acknowledged and not pressed.followups
    await sim.env.advance_time(61)
    assert sim.announcements.last_message.content == "The harbour is ours!"


@pytest.mark.parametrize("interval", [300.0])
async def test_the_loop_wakes_at_once_when_nudged_and_at_the_next_due_step(sim: Sim, interval: float) -> None:
    """With a five-minute interval: the start is sent at once (nudged), and the announcement
    after the 60 s wait goes out at 60 s, not at the next interval."""
    await sim.start_bot(sim.config.model_copy(update={"tick_interval_seconds": interval}))
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert len(sim.announcements.history()) == 1, "no waiting for the interval"
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")

    await sim.env.advance_time(59)
    assert len(sim.announcements.history()) == 1
    await sim.env.advance_time(1.5)
    assert sim.announcements.last_message.content == "The harbour is ours!"
    assert sim.bot.ticker.ticks < 10


async def test_the_wakeable_loop_on_a_real_clock() -> None:
    """Outside the simulation, on the real ``ext.tasks`` loop: the loop sleeps what its body
    answers (not its 30 s interval), a body that raises does not stop it (it sleeps the interval
    instead), and a nudge runs the body at once. Each step waits for the body's next call, not
    for a time: only the body's own 0.05 s or the nudge can bring that call inside ``HANG``."""
    calls: list[float] = []
    called = asyncio.Event()
    loop_time = asyncio.get_running_loop().time

    async def body() -> float:
        calls.append(loop_time())
        called.set()
        if len(calls) == 2:
            raise RuntimeError("a bug in the body")
        return 0.05 if len(calls) == 1 else 30.0

    async def call(number: int) -> None:
        async with asyncio.timeout(HANG):
            while len(calls) < number:
                called.clear()
                await called.wait()

    loop = WakeableLoop(body, interval=30.0, name="test-loop")
    loop.start()
    try:
        await call(2)
        assert calls[1] - calls[0] >= 0.05, "slept what the body answered, no less"
        assert loop.is_running(), "the body's error did not stop the loop"
        upcoming = loop.task.next_iteration
        assert upcoming is not None and (upcoming - discord.utils.utcnow()).total_seconds() > 20, (
            "after the error: asleep for the interval"
        )
        assert len(calls) == 2
        loop.wake()
        await call(3)
        assert len(calls) == 3 and loop.is_running(), "the wake ran the body, not the 30 s interval"
    finally:
        await loop.stop()
