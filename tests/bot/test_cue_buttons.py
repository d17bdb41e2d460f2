"""Regression tests for the cue defects of issue 8 that show in Discord (defects 2 and 16),
driven through the real bot in simcord. Each test is named for the defect it pins; its docstring
says what happened before the fix and what must happen now."""

from __future__ import annotations

from typing import Any

import pytest

from actions.delivery import Cue, Posted
from bot.cogs.cues._render import cue_view
from runner.controls import ControlResult
from runner.history import Actor
from tests.bot.conftest import Sim, buttons
from tests.support.definitions import announce, cue, event, phase


def gates_spec() -> dict[str, Any]:
    """An announcement, a GM cue, and an announcement the cue holds back."""
    return event(
        "gates",
        phase(
            "main",
            announce("The gates open", label="Warn"),
            cue("Open them.", label="Open the gates"),
            announce("The gates open", label="Open"),
        ),
        title="The Gates",
    )


async def test_defect_02_cancel_during_cue_post_closes_the_cue(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a moderator's cancel that landed while the cue was being posted answered
    "cancelled" and closed no cue; the tick then parked the cue on the cancelled run with live
    buttons, and a GM's Confirm was answered "confirmed". Now the cue is closed as soon as the
    tick sees the run ended: buttons disabled, the text saying why (who cancelled, the reason),
    nobody pinged by the edit, and the step cancelled rather than left running."""
    delivery = sim.bot.services.delivery
    post_cue = delivery.post_cue
    cancels: list[ControlResult] = []

    async def post_while_cancelled(cue: Cue) -> Posted:
        posted = await post_cue(cue)
        # /event cancel, pressed while Discord is still answering the post, with the Actor the
        # cog hands the controls.
        actor = Actor(id=str(sim.mod.id), name="mod")
        cancels.append(await sim.bot.services.controls.cancel(cue.run_id, reason="storm", actor=actor))
        return posted

    monkeypatch.setattr(delivery, "post_cue", post_while_cancelled)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.settle()

    (cancelled,) = cancels
    assert cancelled.ok and cancelled.cues == (), "nothing was parked when the cancel landed"
    message = sim.gm_cues.last_message
    assert message.content == (
        f"⏹️ Cancelled: the run was cancelled while this was being posted (cancelled by {sim.mod.mention}: storm)"
    )
    assert buttons(message) == [("Confirm", "cue:2:confirm", True), ("Skip", "cue:2:skip", True)]
    edit = sim.requests("PATCH", f"/channels/{sim.gm_cues.id}/messages/{message.id}")[-1]
    assert edit.json["allowed_mentions"] == {"parse": []}, "closing the cue pings nobody"
    run = await sim.run(1)
    assert run.status == "cancelled"
    assert [s.status for s in run.phases[0].steps] == ["done", "cancelled"]
    assert not run.phases[0].steps[1].parked


async def test_defect_16_a_skip_button_naming_a_pending_announcement_is_refused(sim: Sim) -> None:
    """Before: the Skip handler passed the step id from the button's custom id straight to
    ``skip``, so a cue button naming another step (here: a cue message left from an earlier
    database, whose step 3 is now a pending announcement) skipped that announcement. Now the
    handler acts only on a posted GM cue: the press is refused ephemerally, the announcement
    still goes out after the real cue, and the real cue's own buttons still work."""
    await sim.publish(gates_spec())
    await sim.mod.slash(sim.staff, "event start", definition="gates")
    real_cue = sim.gm_cues.last_message
    assert [s.status for s in (await sim.run(1)).phases[0].steps] == ["done", "running", "pending"]

    channel: Any = sim.bot.get_channel(sim.gm_cues.id)
    await channel.send("A cue from an earlier database", view=cue_view(3))
    await sim.env.settle()
    stale = sim.gm_cues.last_message
    for verb in ("Skip", "Confirm"):
        pressed = await sim.gm.click(stale, label=verb)
        (answer,) = pressed.followups
        assert answer.ephemeral
        assert answer.content.startswith("Nothing changed:"), answer.content
    steps = (await sim.run(1)).phases[0].steps
    assert [s.status for s in steps] == ["done", "running", "pending"], "a refused press changes nothing"
    assert steps[1].parked
    assert sim.gm_cues.last_message.content == "A cue from an earlier database", "nor edits the message"
    assert len(sim.announcements.history()) == 1

    assert (await sim.gm.click(real_cue, label="Confirm")).acknowledged
    await sim.env.settle()
    assert [s.status for s in (await sim.run(1)).phases[0].steps] == ["done", "done", "done"]
    assert len(sim.announcements.history()) == 2, "the announcement the stale button named went out"


async def test_defect_16_a_copied_cue_button_does_not_settle_the_cue_it_names(sim: Sim) -> None:
    """Before: any message whose button carried ``cue:<id>:confirm`` confirmed that cue, so a
    button on another message (a copy left from an earlier database, here naming run 1's live
    cue) settled a cue the GM never saw. Now the handler checks the pressed message is the one
    the cue was posted as: refused ephemerally, the cue stays parked, and its own message still
    works."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    real_cue = sim.gm_cues.last_message
    channel: Any = sim.bot.get_channel(sim.gm_cues.id)
    await channel.send("A copy of a cue", view=cue_view(2))
    await sim.env.settle()
    copy = sim.gm_cues.last_message
    assert copy.id != real_cue.id

    for verb in ("Confirm", "Skip"):
        pressed = await sim.gm.click(copy, label=verb)
        (answer,) = pressed.followups
        assert answer.ephemeral
        assert answer.content == "Nothing changed: this button belongs to another cue message."
    assert (await sim.run(1)).phases[0].steps[1].parked, "the cue it names is untouched"

    assert (await sim.gm.click(real_cue, label="Confirm")).acknowledged
    assert (await sim.run(1)).phases[0].steps[1].status == "done"
