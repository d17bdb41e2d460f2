"""Attendance in Discord (issue 28 item 6), through simcord: a cue with ``attendance: true`` has
a Take attendance button that opens the run's seated members as a select menu for the GM; what
the GM picks is stored (the others on the page are no-shows); staff mark afterwards with
``/event attendance``; ``/event history member:`` shows the record; the staff's sign-up list
shows each member's no-shows. A member without the right changes nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

from runner import attendance
from runner.states import Attendance
from tests.bot.conftest import Sim
from tests.bot.test_live_messages import text_of
from tests.bot.test_signups import book, message_of
from tests.bot.test_staff_signups import with_signups_capability
from tests.support.definitions import cue, event, phase

STARTS_IN = dt.timedelta(minutes=2)


def answered(result: Any) -> Any:
    return [m for m in [result.response, *result.followups] if m is not None][-1]


def spec() -> dict[str, Any]:
    return event(
        "raid-night",
        phase("main", cue("Count heads at the gate", attendance=True)),
        title="Raid Night",
        signup={"channel": "announcements", "options": {"tank": 1, "dps": 2}, "closes": "end"},
    )


async def seated_run(sim: Sim) -> int:
    await with_signups_capability(sim)
    run_id = await book(sim, spec(), starts_in=STARTS_IN)
    await sim.player.click(message_of(sim), label="tank")
    await sim.mod.click(message_of(sim), label="dps")
    return run_id


async def test_the_gm_takes_attendance_from_the_cue_and_the_marks_are_stored(sim: Sim) -> None:
    run_id = await seated_run(sim)
    for _ in range(5):
        await sim.env.advance_time(30)
    cue_message = sim.gm_cues.last_message
    assert cue_message is not None
    labels = [b.label for row in cue_message.components for b in row.children]  # type: ignore[attr-defined]
    assert labels == ["Confirm", "Skip", "Take attendance"]
    opened = await sim.gm.click(cue_message, label="Take attendance")
    panel = opened.response
    assert panel.ephemeral and "not marked" in text_of(panel)
    [menu] = [c for row in panel.components for c in row["components"]]
    assert menu["max_values"] == 2 and {o["value"] for o in menu["options"]} == {
        str(sim.player.id),
        str(sim.mod.id),
    }
    marked = await sim.gm.select(panel, [str(sim.player.id)])
    assert "✅ came" in text_of(marked.response) and "❌ no-show" in text_of(marked.response)
    assert await attendance.marks_of(sim.engine, run_id) == {
        str(sim.player.id): Attendance.ATTENDED,
        str(sim.mod.id): Attendance.NO_SHOW,
    }
    # The staff's list shows the no-show beside the member; the record counts it.
    staff_list = answered(await sim.mod.slash(sim.staff, "event signups list", run=run_id))
    assert f"<@{sim.mod.id}> (1 no-show)" in text_of(staff_list)
    record = answered(await sim.mod.slash(sim.staff, "event history", member=sim.mod))
    assert "❌ no-show 1" in text_of(record) and f"(run {run_id})" in text_of(record)


async def test_staff_mark_one_member_afterwards_and_a_player_is_refused_with_nothing_changed(
    sim: Sim,
) -> None:
    run_id = await seated_run(sim)
    refused = answered(await sim.player.slash(sim.staff, "event attendance", run=run_id))
    assert refused.ephemeral and "Nothing was done." in refused.content
    refused = answered(
        await sim.player.slash(
            sim.staff, "event attendance", run=run_id, member=sim.player, status="attended"
        )
    )
    assert "Nothing was done." in refused.content
    assert await attendance.marks_of(sim.engine, run_id) == {}
    done = answered(
        await sim.mod.slash(sim.staff, "event attendance", run=run_id, member=sim.player, status="no_show")
    )
    assert done.content == f"Marked <@{sim.player.id}> in run {run_id}: no show."
    assert await attendance.marks_of(sim.engine, run_id) == {str(sim.player.id): Attendance.NO_SHOW}
