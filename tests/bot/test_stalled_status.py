"""Staff see a stalled run: ``/event status``, ``/event list`` and the staff log say so, through
the real bot in simcord."""

from __future__ import annotations

import dataclasses
import datetime as dt

from actions import validation_registry
from runner.clock import ManualClock
from runner.engine import Runner, RunnerSettings
from tests.bot.conftest import Sim, raid_spec

WAIT = 3600


async def test_staff_see_a_stalled_run_in_event_status_and_the_staff_log(sim: Sim) -> None:
    """The run waits an hour; another runner that ticks long after the wait was due but is too
    far behind to advance anything (``due_batch=0``) marks it stalled. The bot's own views then
    show it: the status embed's health and a line saying what it means, the run list, and a
    staff-log line saying why."""
    await sim.publish(
        raid_spec(
            phases=[
                {
                    "key": "main",
                    "label": "Main",
                    "steps": [
                        {"action": "core.wait", "label": "Hold", "params": {"duration": WAIT}},
                        {"action": "core.wait", "label": "Then", "params": {"duration": 1}},
                    ],
                }
            ]
        )
    )
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    before = (await sim.mod.slash(sim.staff, "event status", run=1)).response.embeds[0]
    assert before.description.splitlines()[0] == "Status: **running** · Health: **ok**"

    late = sim.now() + dt.timedelta(seconds=WAIT + RunnerSettings().stall_after_seconds + 60)
    behind = Runner(
        sim.engine,
        validation_registry(),
        clock=ManualClock(late),
        owner="behind:1",
        settings=dataclasses.replace(RunnerSettings(), due_batch=0),
    )
    report = await behind.tick()
    assert report.stalled == 1

    embed = (await sim.mod.slash(sim.staff, "event status", run=1)).response.embeds[0]
    lines = embed.description.splitlines()
    assert lines[0] == "Status: **running** · Health: **stalled**"
    assert any(line.startswith("⚠️ Stalled: no runner has moved this run on") for line in lines)
    listed = (await sim.mod.slash(sim.staff, "event list")).response.embeds[0]
    assert any("running, stalled" in (f.value or "") for f in listed.fields)

    await sim.env.advance_time(10)
    posted = [m.content for m in sim.staff_log.history()]
    assert any("is stalled: nobody has advanced it for 11 minutes" in line for line in posted), posted
