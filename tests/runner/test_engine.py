"""The runner's decisions, ported from seed ``eventRunner.test.js``.

The seed stubbed its three tables; here the engine runs its real SQL on a real database, on both
backends (the ``engine`` fixture is parametrized over SQLite and MariaDB). Each docstring names
the promise the test guards.
"""

from __future__ import annotations

import asyncio
import dataclasses

from runner.engine import MAX_ATTEMPTS, RETRY_SECONDS, Runner
from runner.history import Actor
from runner.sql import run_leases, step_leases
from tests.support.world import T0, World, later, phase, step


async def test_a_manually_started_event_announces_waits_and_completes(world: World) -> None:
    """The seed's shipped claim: announce, wait, announce, complete; the wait holds the NEXT
    step, nothing moves inside it, and a run left in flight gives its lease back."""
    world.register(world.scripted.action("test.announce"), world.scripted.action("test.wait"))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 300}
    run_id = await world.seed_run(
        [phase("main", step("test.announce"), step("test.wait"), step("test.announce"))]
    )

    await world.tick(T0)
    s = await world.steps_of(run_id)
    assert [x["status"] for x in s] == ["done", "done", "pending"], (
        "the step after a wait must not run in the same tick"
    )
    assert s[2]["due_at"] == later(300_000), "the wait is the NEXT step's due_at"
    run = await world.run(run_id)
    assert run["status"] == "running"
    assert run["claimed_by"] is None, "a run left in flight gives its lease back"

    await world.tick(later(120_000))
    assert (await world.steps_of(run_id))[2]["status"] == "pending"
    assert (await world.run(run_id))["status"] == "running"

    await world.tick(later(301_000))
    assert (await world.steps_of(run_id))[2]["status"] == "done"
    run = await world.run(run_id)
    assert run["status"] == "completed"
    assert run["health"] == "ok"
    kinds = await world.kinds(run_id)
    assert "phase.completed" in kinds
    assert "run.status" in kinds


async def test_a_run_passes_through_ending_on_its_way_to_completed(world: World) -> None:
    """Every transition scheduled -> starting -> running -> ending -> completed is logged."""
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", step("test.noop"))])
    await world.tick(T0)
    transitions = [line["detail"]["to"] for line in await world.log(run_id) if line["kind"] == "run.status"]
    assert transitions == ["starting", "running", "ending", "completed"]


async def test_phases_run_in_order_and_the_next_one_is_materialised_on_entry(world: World) -> None:
    """A phase's steps are created when the run enters it, and phases run in order."""
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run(
        [phase("opening", step("test.noop")), phase("closing", step("test.noop"), step("test.noop"))]
    )
    await world.tick(T0)
    assert (await world.run(run_id))["status"] == "completed"
    s = await world.steps_of(run_id)
    assert [x["phase"] for x in s] == ["opening", "closing", "closing"]
    assert all(x["status"] == "done" for x in s)


async def test_a_wait_as_the_last_step_of_a_phase_holds_the_next_phase(world: World) -> None:
    """A wait at the end of a phase holds the first step of the NEXT phase; dropping it would
    start the next phase at once."""
    world.register(world.scripted.action("test.noop"), world.scripted.action("test.wait"))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 300}
    run_id = await world.seed_run(
        [phase("opening", step("test.noop"), step("test.wait")), phase("closing", step("test.noop"))]
    )
    await world.tick(T0)
    closing = [x for x in await world.steps_of(run_id) if x["phase"] == "closing"]
    assert len(closing) == 1, "the next phase is materialised"
    assert closing[0]["status"] == "pending"
    assert closing[0]["due_at"] == later(300_000), "the hold crosses the phase boundary"
    assert (await world.run(run_id))["status"] == "running"

    await world.tick(later(301_000))
    assert (await world.run(run_id))["status"] == "completed"


async def test_a_gm_cue_parks_with_no_lease_and_the_reclaim_leaves_it_alone(world: World) -> None:
    """A parked cue is running with a NULL lease; a week later the reclaim has not touched it
    and it was dispatched exactly once."""
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.after"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    run_id = await world.seed_run([phase("main", step("test.cue"), step("test.after"))])

    await world.tick(T0)
    cue, after = await world.steps_of(run_id)
    assert cue["status"] == "running"
    assert cue["claim_expires_at"] is None, "a parked step carries no lease"
    assert after["status"] == "pending", "nothing after a cue proceeds"
    assert "step.parked" in await world.kinds(run_id)

    await world.tick(later(7 * 24 * 60 * 60 * 1000))
    cue = (await world.steps_of(run_id))[0]
    assert cue["status"] == "running"
    assert cue["attempts"] == 1
    assert len(world.scripted["test.cue"].calls) == 1
    assert (await world.run(run_id))["status"] == "running"


async def test_a_reclaim_returns_a_stale_step_without_resetting_attempts(world: World) -> None:
    """Engagement Phase 14's defect: a reclaim must never reset attempts."""
    world.register(world.scripted.action("test.slow"))
    run_id = await world.seed_run([phase("main", step("test.slow"))])
    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    await world.set_step(
        s["id"], status="running", attempts=2, claim_expires_at=later(-1000), claimed_by="dead:1"
    )

    async with world.engine.begin() as conn:
        await step_leases.reclaim_stale(conn, T0, MAX_ATTEMPTS)
    s = (await world.steps_of(run_id))[0]
    assert s["status"] == "pending"
    assert s["attempts"] == 2, "a reclaim must never reset attempts"


async def test_a_step_whose_attempts_are_spent_leaves_running_as_failed(world: World) -> None:
    """Give up first: a spent step is failed, not handed back (or it retries forever)."""
    world.register(world.scripted.action("test.slow"))
    run_id = await world.seed_run([phase("main", step("test.slow"))])
    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    await world.set_step(s["id"], status="running", attempts=MAX_ATTEMPTS, claim_expires_at=later(-1000))

    async with world.engine.begin() as conn:
        outcome = await step_leases.reclaim_stale(conn, T0, MAX_ATTEMPTS)
    assert outcome.failed == 1
    assert outcome.reclaimed == 0, "a row that gave up must not also be reclaimed"
    assert (await world.steps_of(run_id))[0]["status"] == "failed"


async def test_the_tick_applies_on_failure_to_a_step_it_gave_up_on(world: World) -> None:
    """(Beyond the seed) a step given up by the reclaim is a failure like any other: its
    ``on_failure: pause`` pauses the run instead of letting it carry on as if skipped."""
    world.register(world.scripted.action("test.slow"), world.scripted.action("test.after"))
    run_id = await world.seed_run([phase("main", step("test.slow", on_failure="pause"), step("test.after"))])
    world.scripted["test.slow"].answer = {"ok": True, "await": "human"}
    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    await world.set_step(s["id"], attempts=MAX_ATTEMPTS, claim_expires_at=later(-1000), claimed_by="dead:1")

    report = await world.tick(later(1000))
    assert report.gave_up == 1
    assert (await world.run(run_id))["status"] == "paused"
    assert world.scripted["test.after"].calls == []


async def test_a_transient_failure_retries_with_one_idempotency_key_then_applies_on_failure(
    world: World,
) -> None:
    """Flat backoff, degraded from the first retry, one key across attempts, then ``skip``."""
    world.register(world.scripted.action("test.flaky"))
    world.scripted["test.flaky"].answer = {"ok": False, "retry": True, "error": "relay is down"}
    run_id = await world.seed_run([phase("main", step("test.flaky", on_failure="skip"))])

    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    first_key = s["idempotency_key"]
    assert s["status"] == "pending"
    assert s["attempts"] == 1
    assert s["due_at"] == later(RETRY_SECONDS * 1000)
    assert (await world.run(run_id))["health"] == "degraded", "degraded from the first retry"

    await world.tick(later(RETRY_SECONDS * 1000))
    assert (await world.steps_of(run_id))[0]["attempts"] == 2

    await world.tick(later(2 * RETRY_SECONDS * 1000))
    s = (await world.steps_of(run_id))[0]
    assert s["attempts"] == MAX_ATTEMPTS
    assert s["status"] == "failed", "all three dispositions write the step failed"
    run = await world.run(run_id)
    assert run["status"] == "completed", "on_failure: skip lets the run finish"
    assert run["health"] == "degraded"
    assert s["idempotency_key"] == first_key, "the idempotency key does not vary by attempt"
    assert {c.idempotency_key for c in world.scripted["test.flaky"].calls} == {first_key}


async def test_on_failure_pause_stops_the_run_and_the_tick_never_picks_it_up(world: World) -> None:
    """``pause`` pauses the run and leaves the remaining steps alone; only resume moves it."""
    world.register(world.scripted.action("test.bad"), world.scripted.action("test.after"))
    world.scripted["test.bad"].answer = {"ok": False, "retry": False, "error": "the world is half changed"}
    run_id = await world.seed_run([phase("main", step("test.bad", on_failure="pause"), step("test.after"))])

    await world.tick(T0)
    assert (await world.run(run_id))["status"] == "paused"
    bad, after = await world.steps_of(run_id)
    assert bad["status"] == "failed"
    assert after["status"] == "pending", "a paused run leaves its remaining steps alone"

    await world.tick(later(60_000))
    assert (await world.run(run_id))["status"] == "paused"
    assert world.scripted["test.after"].calls == []


async def test_on_failure_abort_run_fails_the_run_and_cancels_what_has_not_started(world: World) -> None:
    world.register(world.scripted.action("test.bad"), world.scripted.action("test.after"))
    world.scripted["test.bad"].answer = {"ok": False, "retry": False, "error": "no"}
    run_id = await world.seed_run(
        [phase("main", step("test.bad", on_failure="abort_run"), step("test.after"))]
    )

    await world.tick(T0)
    assert (await world.run(run_id))["status"] == "failed"
    bad, after = await world.steps_of(run_id)
    assert bad["status"] == "failed"
    assert after["status"] == "cancelled"


async def test_an_unregistered_action_fails_terminal_with_its_id_and_degrades_the_run(world: World) -> None:
    """Never a silent skip (§L): terminal on the first attempt, its id in the error."""
    run_id = await world.seed_run([phase("main", step("gone.verb", on_failure="skip"))])
    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    assert s["status"] == "failed"
    assert s["attempts"] == 1, "a dormant action is terminal, so it is not retried"
    assert "gone.verb" in s["last_error"]
    assert (await world.run(run_id))["health"] == "degraded"


async def test_a_held_concurrency_key_holds_the_run_and_logs_the_reason_once(world: World) -> None:
    """The holder is parked on a cue (genuinely in flight); the waiting run stays scheduled with
    the holder named in ``last_error``, ``run.blocked`` is logged once, and it starts once the
    holder finishes."""
    world.register(world.scripted.action("test.noop"), world.scripted.action("test.cue"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    holder = await world.seed_run([phase("main", step("test.cue"))], concurrency_key="invasion:Yew")
    # The holder takes the key before the other run exists: two runs due at one instant start
    # concurrently, and which of them takes the key first is the database's to decide.
    await world.tick(T0)
    waiting = await world.seed_run([phase("main", step("test.noop"))], concurrency_key="invasion:Yew")

    await world.tick(T0)
    run = await world.run(waiting)
    assert run["status"] == "scheduled"
    assert f"run {holder}" in run["last_error"]
    assert (await world.kinds(waiting)).count("run.blocked") == 1

    await world.tick(later(15_000))
    assert (await world.kinds(waiting)).count("run.blocked") == 1, (
        "a line per tick would bury the one that matters"
    )
    assert (await world.run(waiting))["wake_at"] > later(15_000), (
        "a blocked run costs the tick nothing meanwhile"
    )

    # Ended before the waiting run's own recheck (due 10 s after the 15 s look): only the
    # holder's wake can make it due now. Were both due in one tick, the waiting run's look could
    # read the key held and write its recheck after the holder's wake committed: the race that
    # ``blocked_recheck_seconds`` bounds (runner/engine/core.py), not the promise pinned here.
    cue = (await world.steps_of(holder))[0]
    assert (await world.controls.confirm(cue["id"], actor=Actor(None, "gm"))).ok
    await world.tick(later(20_000))
    assert (await world.run(holder))["status"] == "completed"
    assert (await world.run(waiting))["wake_at"] == later(20_000), "the holder wakes its waiters as it ends"
    await world.tick(later(21_000))
    assert (await world.run(waiting))["status"] == "completed"


async def test_an_occurrence_past_its_own_grace_window_is_missed(world: World) -> None:
    """Per-definition grace: outside it, missed (steps cancelled, logged), never a late silent
    start; inside it, a late start."""
    world.register(world.scripted.action("test.noop"))
    late = await world.seed_run([phase("main", step("test.noop"))], grace_seconds=600)
    inside = await world.seed_run([phase("main", step("test.noop"))], grace_seconds=3600)

    await world.tick(later(30 * 60 * 1000))
    assert (await world.run(late))["status"] == "missed"
    assert (await world.steps_of(late))[0]["status"] == "cancelled"
    assert any(
        line["kind"] == "run.status" and line["detail"]["to"] == "missed" for line in await world.log(late)
    )
    assert (await world.run(inside))["status"] == "completed", "inside its window it starts late"


async def test_a_run_in_ending_when_the_process_died_is_completed_by_the_next_tick(world: World) -> None:
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", step("test.noop"))], status="ending")
    await world.set_run(run_id, current_phase="main")
    await world.tick(T0)
    assert (await world.run(run_id))["status"] == "completed"


async def test_a_live_lease_is_not_reenterable_not_even_by_its_holder(world: World) -> None:
    """The CAS is what protects a tick that overran into the next one."""
    world.register(world.scripted.action("test.cue"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    run_id = await world.seed_run([phase("main", step("test.cue"))])
    await world.tick(T0)
    await world.set_run(run_id, claimed_by=world.runner.owner, claim_expires_at=later(60_000))
    async with world.engine.begin() as conn:
        taken = await run_leases.claim_tick(conn, run_id, world.runner.owner, later(120_000), T0)
    assert taken is False


async def test_an_action_that_throws_is_a_transient_failure_not_a_crashed_tick(world: World) -> None:
    async def thrower(envelope: object, params: object) -> object:
        raise RuntimeError("boom")

    world.register(world.scripted.action("test.thrower", perform=thrower))
    run_id = await world.seed_run([phase("main", step("test.thrower", on_failure="skip"))])
    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    assert s["status"] == "pending"
    assert "boom" in s["last_error"]
    assert (await world.run(run_id))["status"] == "running", "one bad action does not stop the deployment"


async def test_an_action_that_never_answers_is_cut_off_at_its_budget(world: World) -> None:
    async def hang(envelope: object, params: object) -> object:
        await asyncio.Event().wait()
        return None

    world.register(world.scripted.action("test.hang", budget_ms=30, perform=hang))
    run_id = await world.seed_run([phase("main", step("test.hang", on_failure="skip"))])
    await world.tick(T0)
    s = (await world.steps_of(run_id))[0]
    assert s["status"] == "pending", "a timeout is transient"
    assert "budget" in s["last_error"]


async def test_the_dispatch_envelope_carries_exactly_what_the_seed_says(world: World) -> None:
    """§F: actor, idempotency key (40 hex), params, run id, scope, step id, verify; nothing else."""
    world.register(world.scripted.action("test.echo"))
    run_id = await world.seed_run([phase("main", step("test.echo", {"x": 1}))], scope="atlantic")
    await world.tick(T0)
    [envelope] = world.scripted["test.echo"].calls
    assert envelope.run_id == run_id
    assert envelope.scope == "atlantic"
    assert envelope.verify is False
    assert envelope.params == {"x": 1}
    assert len(envelope.idempotency_key) == 40
    int(envelope.idempotency_key, 16)
    assert sorted(f.name for f in dataclasses.fields(envelope)) == [
        "actor",
        "idempotency_key",
        "params",
        "run_id",
        "scope",
        "step_id",
        "verify",
    ]


async def test_one_broken_run_never_stops_the_others_and_is_logged_once(world: World, caplog) -> None:  # type: ignore[no-untyped-def]
    """A run the engine cannot advance (here: its pinned version no longer parses) is logged
    once with its id, retried after the backoff, and every other run carries on. (The broken
    definition is also reported by the materialise pass, which carries on past it too.)"""
    import sqlalchemy as sa

    from runner.schema import versions

    world.register(world.scripted.action("test.noop"))
    broken = await world.seed_run([phase("main", step("test.noop"))])
    healthy = await world.seed_run([phase("main", step("test.noop"))])
    version_id = (await world.run(broken))["version_id"]
    async with world.engine.begin() as conn:
        await conn.execute(
            sa.update(versions).where(versions.c.id == version_id).values(spec={"nonsense": True})
        )
    # A runner of its own, as a process started after the edit: nothing parsed is cached yet.
    world.runner = Runner(world.engine, world.registry, clock=world.clock, owner="host:test")

    caplog.set_level("ERROR", logger="runner.engine")
    first = await world.tick(T0)
    assert (await world.run(healthy))["status"] == "completed"
    assert [e for e in first.errors if e.startswith(f"run {broken}:")] != []
    assert not [e for e in first.errors if e.startswith(f"run {healthy}:")]
    assert (await world.run(broken))["wake_at"] == later(RETRY_SECONDS * 1000), (
        "looked at again after the backoff"
    )

    await world.tick(later(RETRY_SECONDS * 1000))
    logged = [r for r in caplog.records if f"run {broken}" in r.getMessage()]
    assert len(logged) == 1, "a repeating error is logged once, not on every tick"
    assert logged[0].run_id == broken  # type: ignore[attr-defined]


async def test_a_pause_pressed_mid_batch_stops_the_batch_at_the_next_step(world: World) -> None:
    """The seed-named defect: the runner drained up to 24 more steps after a pause because it
    checked the run's status only at the top of the tick. Here a moderator pauses while step 2
    is being dispatched; step 3 must not go out."""
    run_id = await world.seed_run(
        [phase("main", step("test.noop"), step("test.pauses"), step("test.noop"), step("test.noop"))]
    )

    async def pause_meanwhile(envelope: object, params: object) -> dict[str, bool]:
        assert (await world.controls.pause(run_id, actor=Actor(None, "mod"))).ok
        return {"ok": True}

    world.register(
        world.scripted.action("test.noop"), world.scripted.action("test.pauses", perform=pause_meanwhile)
    )
    await world.tick(T0)
    assert [s["status"] for s in await world.steps_of(run_id)] == ["done", "done", "pending", "pending"]
    assert len(world.scripted["test.noop"].calls) == 1
    run = await world.run(run_id)
    assert (run["status"], run["claimed_by"]) == ("paused", None)


async def test_a_tick_advances_one_run_by_a_bounded_number_of_steps(engine) -> None:  # type: ignore[no-untyped-def]
    """One long event cannot starve the others: the rest waits for the next tick."""
    from runner.engine import RunnerSettings

    world = World(engine, settings=RunnerSettings(steps_per_tick=2))
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", *[step("test.noop")] * 5)])
    await world.tick(T0)
    assert [s["status"] for s in await world.steps_of(run_id)].count("done") == 2
    assert (await world.run(run_id))["wake_at"] == T0, "it asks for another tick at once"
    await world.tick(later(1))
    await world.tick(later(2))
    assert (await world.run(run_id))["status"] == "completed"
