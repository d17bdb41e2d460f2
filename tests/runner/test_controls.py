"""The human controls (seed phase 3): each a compare-and-set on the status it acts from; a lost
race changes nothing and says why in a moderator's words; every control logs its actor."""

from __future__ import annotations

import pytest

from runner import catalog
from runner import definitions as defs
from runner.answers import Control, Reason
from runner.history import Actor
from tests.support.definitions import event, wait
from tests.support.world import T0, World, later, phase, step
from wiring.control_text import control_text as said


@pytest.fixture
def cue_world(world: World) -> World:
    world.register(
        world.scripted.action("test.noop"),
        world.scripted.action("test.cue"),
        world.scripted.action("test.bad"),
    )
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    world.scripted["test.bad"].answer = {"ok": False, "retry": False, "error": "the gate is jammed"}
    return world


async def snapshot(world: World, run_id: int) -> tuple[object, ...]:
    run = await world.run(run_id)
    steps = await world.steps_of(run_id)
    return (dict(run), [dict(s) for s in steps], len(await world.log(run_id)))


async def test_confirm_settles_a_parked_cue_logs_the_actor_and_the_run_carries_on(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.noop"))])
    await world.tick(T0)
    cue = (await world.steps_of(run_id))[0]

    result = await world.controls.confirm(cue["id"], actor=Actor(None, "gm:ana"), note="gate opened")
    assert result.ok and said(result) == "confirmed"
    line = (await world.log(run_id))[-1]
    assert (line["kind"], line["actor_name"]) == ("step.confirmed", "gm:ana")

    await world.tick(later(1))
    assert (await world.run(run_id))["status"] == "completed"


async def test_a_second_confirm_is_told_already_confirmed_and_changes_nothing(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.cue"))])
    await world.tick(T0)
    cue = (await world.steps_of(run_id))[0]
    assert (await world.controls.confirm(cue["id"], actor=Actor(None, "gm:ana"))).ok
    before = await snapshot(world, run_id)

    again = await world.controls.confirm(cue["id"], actor=Actor(None, "gm:bob"))
    assert not again.ok
    assert (again.reason, again.by, again.step_id) == (
        Reason.ALREADY_CONFIRMED,
        Actor(None, "gm:ana"),
        cue["id"],
    )
    assert said(again) == "already confirmed by gm:ana"
    assert await snapshot(world, run_id) == before


async def test_confirm_refuses_a_step_that_is_not_parked(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.noop"))])
    await world.tick(T0)
    pending = (await world.steps_of(run_id))[1]
    result = await world.controls.confirm(pending["id"], actor=Actor(None, "gm"))
    assert (result.ok, said(result)) == (False, "that step has not been reached yet")
    assert said(await world.controls.confirm(999_999, actor=Actor(None, "gm"))) == "no such step: 999999"


async def test_a_confirm_on_a_cue_of_a_paused_run_settles_it_but_does_not_advance_until_resumed(
    cue_world: World,
) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.noop"))])
    await world.tick(T0)
    cue = (await world.steps_of(run_id))[0]
    assert (await world.controls.pause(run_id, actor=Actor(None, "mod"))).ok

    result = await world.controls.confirm(cue["id"], actor=Actor(None, "gm"))
    assert result.ok and "paused" in said(result)
    await world.tick(later(1000))
    assert [s["status"] for s in await world.steps_of(run_id)] == ["done", "pending"]

    assert (await world.controls.resume(run_id, actor=Actor(None, "mod"))).ok
    await world.tick(later(2000))
    assert (await world.run(run_id))["status"] == "completed"


async def test_pause_is_a_cas_from_running_and_a_second_pause_says_so(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"))])
    await world.tick(T0)
    assert (await world.controls.pause(run_id, actor=Actor(None, "mod"))).ok
    before = await snapshot(world, run_id)
    again = await world.controls.pause(run_id, actor=Actor(None, "mod2"))
    assert (again.ok, again.reason, said(again)) == (
        False,
        Reason.ALREADY_PAUSED,
        "the run is already paused",
    )
    assert await snapshot(world, run_id) == before
    line = [entry for entry in await world.log(run_id) if entry["kind"] == "run.status"][-1]
    assert (line["actor_name"], line["detail"]["to"]) == ("mod", "paused")


async def test_controls_on_a_run_that_does_not_exist_say_no_such_run(cue_world: World) -> None:
    controls = cue_world.controls
    assert said(await controls.pause(404)) == "cannot pause: no such run: 404"
    assert said(await controls.resume(404)) == "cannot resume: no such run: 404"
    assert said(await controls.cancel(404, reason="x")) == "cannot cancel: no such run: 404"
    assert said(await controls.retry(404)) == "cannot retry: no such run: 404"


async def test_resume_carries_a_run_paused_after_a_failed_step_on_past_it(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.bad", on_failure="pause"), step("test.noop"))])
    await world.tick(T0)
    run = await world.run(run_id)
    assert run["status"] == "paused"
    assert "the gate is jammed" in run["last_error"]

    resumed = await world.controls.resume(run_id, actor=Actor(None, "mod"))
    assert resumed.ok
    await world.tick(later(1))
    assert [s["status"] for s in await world.steps_of(run_id)] == ["failed", "done"]
    assert (await world.run(run_id))["status"] == "completed"
    ended = await world.controls.resume(run_id)
    assert (ended.control, ended.reason, ended.run_status) == (Control.RESUME, Reason.RUN_ENDED, "completed")
    assert said(ended) == "cannot resume: the run has already completed"


async def test_retry_requeues_the_failed_step_with_fresh_attempts_and_sets_the_run_going(
    cue_world: World,
) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.bad", on_failure="pause"), step("test.noop"))])
    await world.tick(T0)
    world.scripted["test.bad"].answer = {"ok": True}

    result = await world.controls.retry(run_id, actor=Actor(None, "mod"))
    assert result.ok
    bad = (await world.steps_of(run_id))[0]
    assert (bad["status"], bad["attempts"], bad["due_at"]) == ("pending", 0, None)
    assert (await world.run(run_id))["status"] == "running"
    await world.tick(later(1))
    assert (await world.run(run_id))["status"] == "completed"
    assert len(world.scripted["test.bad"].calls) == 2
    assert {c.idempotency_key for c in world.scripted["test.bad"].calls} == {bad["idempotency_key"]}


async def test_retry_is_offered_only_when_the_furthest_started_step_failed(cue_world: World) -> None:
    """A phase that carried on past an ``on_failure: skip`` failure and parked at a later cue has
    nothing to retry: the failure is behind its cursor."""
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.bad", on_failure="skip"), step("test.cue"))])
    await world.tick(T0)
    assert [s["status"] for s in await world.steps_of(run_id)] == ["failed", "running"]
    before = await snapshot(world, run_id)
    result = await world.controls.retry(run_id, actor=Actor(None, "mod"))
    assert (result.ok, said(result)) == (
        False,
        "nothing to retry: the run has not stopped at a failed step",
    )
    assert await snapshot(world, run_id) == before


async def test_cancel_needs_a_reason_and_cancels_pending_steps_and_parked_cues(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.noop"))])
    await world.tick(T0)
    before = await snapshot(world, run_id)
    refused = await world.controls.cancel(run_id, reason="  ", actor=Actor(None, "mod"))
    assert not refused.ok and "reason" in said(refused)
    assert await snapshot(world, run_id) == before

    result = await world.controls.cancel(run_id, reason="server restart", actor=Actor(None, "mod"))
    assert result.ok
    assert [c.step_id for c in result.cues] == [(await world.steps_of(run_id))[0]["id"]], (
        "open cues to update"
    )
    assert (await world.run(run_id))["status"] == "cancelled"
    assert [s["status"] for s in await world.steps_of(run_id)] == ["cancelled", "cancelled"]
    line = (await world.log(run_id))[-1]
    assert (line["actor_name"], line["detail"]["reason"]) == ("mod", "server restart")

    cue = (await world.steps_of(run_id))[0]
    late = await world.controls.confirm(cue["id"], actor=Actor(None, "gm"))
    assert (late.ok, late.reason, late.run_status) == (False, Reason.STEP_CANCELLED, "cancelled")
    assert said(late) == "the run was cancelled, so this step was cancelled"
    assert said(await world.controls.cancel(run_id, reason="again")) == "cannot cancel: the run was cancelled"


async def test_cancel_leaves_a_step_being_dispatched_alone(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.noop"), step("test.noop"))])
    first = (await world.steps_of(run_id))[0]
    await world.set_run(run_id, status="running", current_phase="main")
    await world.set_step(first["id"], status="running", claimed_by="host:x", claim_expires_at=later(60_000))
    assert (await world.controls.cancel(run_id, reason="stop", actor=Actor(None, "mod"))).ok
    assert [s["status"] for s in await world.steps_of(run_id)] == ["running", "cancelled"]


async def test_skip_settles_a_pending_step_or_a_parked_cue_but_not_a_failed_one(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.noop"), step("test.noop"))])
    await world.tick(T0)
    cue, second, third = await world.steps_of(run_id)
    assert (await world.controls.skip(third["id"], actor=Actor(None, "mod"), run_id=run_id)).ok
    assert (await world.controls.skip(cue["id"], actor=Actor(None, "gm"))).ok
    again = await world.controls.skip(cue["id"], actor=Actor(None, "gm2"))
    assert (again.ok, said(again)) == (False, "already skipped by gm")
    wrong_run = await world.controls.skip(second["id"], actor=Actor(None, "mod"), run_id=run_id + 1000)
    assert not wrong_run.ok and "no such step" in said(wrong_run)
    await world.tick(later(1))
    assert [s["status"] for s in await world.steps_of(run_id)] == ["skipped", "done", "skipped"]
    assert (await world.run(run_id))["status"] == "completed"


async def test_skip_refuses_a_failed_step(cue_world: World) -> None:
    world = cue_world
    run_id = await world.seed_run([phase("main", step("test.bad", on_failure="pause"), step("test.noop"))])
    await world.tick(T0)
    bad = (await world.steps_of(run_id))[0]
    result = await world.controls.skip(bad["id"], actor=Actor(None, "mod"))
    assert (result.ok, said(result)) == (
        False,
        "that step failed; use retry, or resume to carry on past it",
    )


async def test_start_creates_one_run_per_scope_and_refuses_a_second_start_in_flight(world: World) -> None:
    spec = event(
        "invasion", phase("main", wait(60)), scopes=["Yew", "Oak"], concurrency_key="invasion:{scope}"
    )
    from actions import validation_registry

    await catalog.publish(world.engine, defs.validate(spec, validation_registry()), T0)
    started = await world.controls.start("invasion", actor=Actor(None, "mod"))
    assert started.ok and len(started.run_ids) == 2
    assert [(await world.run(r))["concurrency_key"] for r in started.run_ids] == [
        "invasion:Yew",
        "invasion:Oak",
    ]
    again = await world.controls.start("invasion", scope="Yew", actor=Actor(None, "mod"))
    assert not again.ok and "already in flight" in said(again)
    unknown = await world.controls.start("invasion", scope="Elm", actor=Actor(None, "mod"))
    assert not unknown.ok and "Yew, Oak" in said(unknown)
    missing = await world.controls.start("nope", actor=Actor(None, "mod"))
    assert (missing.ok, said(missing)) == (False, "no published event is called 'nope'")
    rehearsal = await world.controls.start("invasion", scope="Yew", actor=Actor(None, "mod"), rehearsal=True)
    assert rehearsal.ok
    run = await world.run(rehearsal.run_id)
    assert run["rehearsal"] and run["concurrency_key"] == "rehearsal:invasion:Yew", (
        "never blocks the live event"
    )
    created = [line for line in await world.log(started.run_ids[0]) if line["kind"] == "run.created"]
    assert created[0]["actor_name"] == "mod"


async def test_a_control_wakes_the_front_end(world: World) -> None:
    woken: list[int] = []
    world.controls._on_change = lambda: woken.append(1)
    world.register(world.scripted.action("test.cue"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    run_id = await world.seed_run([phase("main", step("test.cue"))])
    await world.tick(T0)
    await world.controls.pause(run_id, actor=Actor(None, "mod"))
    await world.controls.resume(run_id, actor=Actor(None, "mod"))
    assert woken == [1], "resume changed what the tick can do; pause did not need a tick"
