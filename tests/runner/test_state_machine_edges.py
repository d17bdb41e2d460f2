"""Regression tests for the runner's state-machine defects of issue 8 (defects 2, 14, 16): a cue
and a cancel at once, a finished wait on a concurrency key, a cue button naming the wrong step.
(Defect 1, lost occurrences, is in ``test_occurrences_never_lost.py``.)

Each test is named for the defect it pins and runs on both backends (the ``engine`` fixture).
Its docstring says what happened before the fix and what must happen now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from actions.delivery import Cue, Posted, RecordingDelivery, cue_closer
from actions.messaging import cue_action
from runner import views
from runner.engine import Runner
from runner.history import Actor
from tests.support.world import T0, World, later, phase, step
from wiring.control_text import closed_cue_text
from wiring.control_text import control_text as said

# ── Defect 2: cancel while a cue is being posted ─────────────────────────────


@dataclass
class CancellingDelivery(RecordingDelivery):
    """Posts the cue, but a moderator's ``/event cancel`` lands while it is being posted."""

    world: World | None = None
    cancels: list[Any] = field(default_factory=list)

    async def post_cue(self, cue: Cue) -> Posted:
        assert self.world is not None
        self.cancels.append(
            await self.world.controls.cancel(cue.run_id, reason="wrong world", actor=Actor(None, "mod"))
        )
        return await super().post_cue(cue)


def with_real_cue(world: World, delivery: RecordingDelivery) -> None:
    """The real ``gm.cue`` action on ``delivery``, and a runner wired to close cues through it,
    as ``wiring.services.assemble`` wires the bot's."""
    world.runner = Runner(
        world.engine,
        world.registry,
        clock=world.clock,
        owner="host:test",
        versions=world.runner.versions,
        close_parked=cue_closer(delivery),
    )
    world.register(cue_action(delivery, views.step_describer(world.engine, world.runner.versions)))


async def test_defect_02_cancel_during_cue_post_closes_the_cue(world: World) -> None:
    """Before: a cancel pressed while a ``gm.cue`` was being posted answered "cancelled" and
    closed no cue; the tick then parked the cue on the cancelled run (live buttons, step
    ``running`` on a terminal run) and a GM's Confirm was answered "confirmed" (step ``done``).
    Now the park is refused because the run ended: the step is cancelled, the posted cue is
    closed with the reason, and Confirm / Skip answer "the run was cancelled" and change
    nothing."""
    delivery = CancellingDelivery(world=world)
    with_real_cue(world, delivery)
    world.register(world.scripted.action("test.after"))
    run_id = await world.seed_run(
        [phase("main", step("gm.cue", {"instructions": "Open the gates"}), step("test.after"))]
    )

    await world.tick(T0)
    (cancelled,) = delivery.cancels
    assert cancelled.ok and cancelled.cues == (), "nothing was parked yet when the cancel landed"
    assert len(delivery.cues()) == 1, "the cue did go out"
    cue, after = await world.steps_of(run_id)
    assert (await world.run(run_id))["status"] == "cancelled"
    assert cue["status"] == "cancelled", "no step parks on a run that ended"
    assert cue["claim_expires_at"] is None and cue["claimed_by"] is None
    assert cue["result"]["posted"]["message_id"] == delivery.sent[0].posted.message_id
    assert after["status"] == "cancelled"
    ((closed_step, closed_at, ended),) = delivery.closed
    assert (closed_step, closed_at) == (cue["id"], delivery.sent[0].posted)
    assert ended.status == "cancelled"
    assert ended.why == "wrong world", "the cue says why it is closed"
    assert ended.by is not None and ended.by.name == "mod", "and who closed it"
    assert closed_cue_text(ended).startswith("the run was cancelled while this was being posted")
    assert "step.parked" not in await world.kinds(run_id)
    assert "step.cancelled" in await world.kinds(run_id)

    for verb in ("confirm", "skip"):
        refused = await world.controls.settle_cue(cue["id"], verb, actor=Actor(None, "gm"))
        assert not refused.ok, verb
        assert "the run was cancelled" in said(refused)
    assert (await world.steps_of(run_id))[0]["status"] == "cancelled", "a refused press changes nothing"


@pytest.mark.parametrize(
    "answer",
    [
        {"ok": True},
        {"ok": False, "retry": True, "error": "503"},
        {"ok": False, "retry": False, "error": "no"},
    ],
    ids=["done", "retry", "failed"],
)
async def test_defect_02_a_step_out_when_its_run_was_cancelled_settles_cancelled(
    world: World, answer: dict[str, Any]
) -> None:
    """Before: a leased step whose run was cancelled meanwhile was settled as if the run lived
    on (``done``, ``failed``, or back to ``pending`` for a retry) on a terminal run. Now, when
    its dispatch comes back, it is ``cancelled``, lease cleared, and nothing else happens."""

    async def cancel_then_answer(envelope: Any, params: Any) -> dict[str, Any]:
        assert (await world.controls.cancel(envelope.run_id, reason="stop", actor=Actor(None, "mod"))).ok
        return answer

    world.register(world.scripted.action("test.slow", perform=cancel_then_answer))
    run_id = await world.seed_run([phase("main", step("test.slow", on_failure="pause"))])
    await world.tick(T0)
    (only,) = await world.steps_of(run_id)
    assert (only["status"], only["claim_expires_at"], only["claimed_by"]) == ("cancelled", None, None)
    run = await world.run(run_id)
    assert run["status"] == "cancelled"
    assert run["health"] == "ok", "a cancelled run is not degraded by what came back after it"
    await world.tick(later(60_000))
    assert (await world.steps_of(run_id))[0]["status"] == "cancelled"


async def test_defect_02_a_confirm_of_a_cue_left_parked_on_an_ended_run_changes_nothing(world: World) -> None:
    """Before: confirm's statement checked only the step, so a cue parked on a run that had
    ended (as the race above left them) was confirmed and its step went ``done``. Now confirm
    and skip check the run as the step claim does: refused, "the run was cancelled"."""
    world.register(world.scripted.action("gm.cue"))
    world.scripted["gm.cue"].answer = {"ok": True, "await": "human"}
    run_id = await world.seed_run([phase("main", step("gm.cue"))])
    await world.tick(T0)
    (cue,) = await world.steps_of(run_id)
    assert cue["status"] == "running" and cue["claim_expires_at"] is None
    await world.set_run(run_id, status="cancelled")

    for refused in (
        await world.controls.confirm(cue["id"], actor=Actor(None, "gm")),
        await world.controls.skip(cue["id"], actor=Actor(None, "gm")),
    ):
        assert not refused.ok
        assert "the run was cancelled" in said(refused)
    assert (await world.steps_of(run_id))[0]["status"] == "running", "nothing changed"


async def test_defect_02_a_cue_posted_while_its_run_was_paused_still_parks(world: World) -> None:
    """The guard takes only ended runs: a pause pressed while a cue is being posted leaves the
    cue parked (a GM may confirm it; the run carries on when resumed), as before."""

    async def pause_then_park(envelope: Any, params: Any) -> dict[str, Any]:
        assert (await world.controls.pause(envelope.run_id, actor=Actor(None, "mod"))).ok
        return {"ok": True, "await": "human"}

    world.register(world.scripted.action("gm.cue", perform=pause_then_park))
    run_id = await world.seed_run([phase("main", step("gm.cue"))])
    await world.tick(T0)
    (cue,) = await world.steps_of(run_id)
    assert (cue["status"], cue["claim_expires_at"]) == ("running", None)
    confirmed = await world.controls.confirm(cue["id"], actor=Actor(None, "gm"))
    assert confirmed.ok and "paused" in said(confirmed)


# ── Defect 14: a completed run still says it is waiting on a concurrency key ──


async def test_defect_14_a_run_that_waited_on_a_concurrency_key_forgets_the_wait_once_started(
    world: World,
) -> None:
    """Before: a run blocked on a held key kept "waiting: concurrency key … is held by run 1" in
    ``last_error`` through to ``completed``, so ``runs`` and status said it was still waiting.
    Now starting clears ``last_error`` and ``blocked_by`` (the run log keeps the history)."""
    world.register(world.scripted.action("test.noop"), world.scripted.action("test.cue"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    holder = await world.seed_run([phase("main", step("test.cue"))], concurrency_key="k")
    waiting = await world.seed_run([phase("main", step("test.noop"))], concurrency_key="k")
    await world.tick(T0)
    blocked = await world.run(waiting)
    assert blocked["last_error"] == f"waiting: concurrency key 'k' is held by run {holder}"
    assert blocked["blocked_by"] == holder

    cue = (await world.steps_of(holder))[0]
    assert (await world.controls.confirm(cue["id"], actor=Actor(None, "gm"))).ok
    await world.tick(later(1000))
    await world.tick(later(2000))
    done = await world.run(waiting)
    assert done["status"] == "completed"
    assert done["last_error"] is None
    assert done["blocked_by"] is None
    assert "run.blocked" in await world.kinds(waiting), "the history still says it waited"


# ── Defect 16: cue buttons act on any step id ────────────────────────────────


async def test_defect_16_a_cue_button_refuses_a_step_that_is_not_a_posted_cue(world: World) -> None:
    """Before: the Skip button handed whatever step id its custom id named to ``skip``, so a
    forged ``cue:<id>:skip`` skipped a pending announcement. Now ``settle_cue`` acts only on a
    ``gm.cue`` step that was posted: a pending announcement, a pending cue and a parked step of
    another action are refused, and nothing changes."""
    world.register(
        world.scripted.action("gm.cue"), world.scripted.action("test.park"), world.scripted.action("test.say")
    )
    world.scripted["gm.cue"].answer = {"ok": True, "await": "human"}
    world.scripted["test.park"].answer = {"ok": True, "await": "human"}
    cued = await world.seed_run([phase("main", step("gm.cue"), step("test.say"), step("gm.cue"))])
    other = await world.seed_run([phase("main", step("test.park"))])
    await world.tick(T0)
    cue, announce, later_cue = await world.steps_of(cued)
    (parked_other,) = await world.steps_of(other)
    assert cue["status"] == parked_other["status"] == "running"

    for step_id in (announce["id"], later_cue["id"], parked_other["id"]):
        for verb in ("skip", "confirm"):
            refused = await world.controls.settle_cue(step_id, verb, actor=Actor(None, "gm"))
            assert not refused.ok, (step_id, verb)
    assert not (await world.controls.settle_cue(cue["id"], "delete", actor=Actor(None, "gm"))).ok
    assert [s["status"] for s in await world.steps_of(cued)] == ["running", "pending", "pending"]
    assert (await world.steps_of(other))[0]["status"] == "running"
    assert "step.skipped" not in await world.kinds(cued)

    assert (await world.controls.settle_cue(cue["id"], "skip", actor=Actor(None, "gm"))).ok, (
        "the posted cue itself may"
    )
    again = await world.controls.settle_cue(cue["id"], "confirm", actor=Actor(None, "gm"))
    assert not again.ok and said(again) == "already skipped by gm", "an earlier cue is told what happened"
