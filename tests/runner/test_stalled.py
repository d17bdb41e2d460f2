"""The ``stalled`` health (seed health model: ok / degraded / stalled), on both backends.

A run in progress is stalled when nobody advances it: far past its wake with no live lease, or
when the reclaim keeps handing one of its steps back (its runner keeps dying on it). The tick
marks it and logs ``run.stalled`` once; the first thing that moves the run again puts its health
back (``degraded`` if it had been degraded, else ``ok``) and logs ``run.recovered``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from runner.engine import MAX_ATTEMPTS, RunnerSettings
from tests.support.world import T0, World, later, phase, step

STALL_AFTER = RunnerSettings().stall_after_seconds


def _lines(log: list, kind: str) -> list:
    return [line for line in log if line["kind"] == kind]


def _behind(world: World) -> World:
    """A runner that advances one run per tick: the others wait their turn."""
    return World(world.engine, settings=dataclasses.replace(RunnerSettings(), due_batch=1))


async def test_a_run_late_but_within_the_stall_window_is_not_stalled(world: World) -> None:
    """A tick that comes a little late is not a stall: just inside the window the run moves on
    with its health untouched and nothing is logged."""
    world.register(world.scripted.action("test.wait"), world.scripted.action("test.noop"))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 60}
    run_id = await world.seed_run([phase("main", step("test.wait"), step("test.noop"))])
    await world.tick(T0)

    report = await world.tick(later((60 + STALL_AFTER - 1) * 1000))
    assert report.stalled == 0
    run = await world.run(run_id)
    assert (run["status"], run["health"]) == ("completed", "ok")
    assert "run.stalled" not in await world.kinds(run_id)


async def test_overdue_runs_nobody_advances_are_stalled_until_each_moves_again(world: World) -> None:
    """Both runs wanted a tick 60 s in and nobody ticked for longer than the stall window (the
    runner was down). The tick that comes back marks both stalled but, being behind, advances
    only one: that one recovers in the same tick (both lines stay in its log, saying it stood
    still), the other stays stalled, logged once, until its turn comes."""
    world = _behind(world)
    world.register(world.scripted.action("test.wait"), world.scripted.action("test.noop"))
    world.scripted["test.wait"].answer = {"ok": True, "holdFor": 60}
    first = await world.seed_run([phase("main", step("test.wait"), step("test.noop"))])
    second = await world.seed_run([phase("main", step("test.wait"), step("test.noop"))])
    await world.tick(T0)
    await world.tick(T0)
    assert [(await world.run(r))["health"] for r in (first, second)] == ["ok", "ok"]

    back = later((60 + STALL_AFTER + 120) * 1000)
    report = await world.tick(back)
    assert report.stalled == 2
    run = await world.run(first)
    assert (run["status"], run["health"]) == ("completed", "ok")
    assert [k for k in await world.kinds(first) if k in ("run.stalled", "run.recovered")] == [
        "run.stalled",
        "run.recovered",
    ]
    run = await world.run(second)
    assert (run["status"], run["health"]) == ("running", "stalled")
    (stalled,) = _lines(await world.log(second), "run.stalled")
    assert stalled["detail"]["reason"] == "overdue"
    assert stalled["detail"]["from"] == "ok"
    assert stalled["detail"]["overdue_seconds"] == STALL_AFTER + 120

    await world.tick(back + dt.timedelta(seconds=1))
    run = await world.run(second)
    assert (run["status"], run["health"]) == ("completed", "ok"), "moving again clears the stall"
    log = await world.log(second)
    assert len(_lines(log, "run.stalled")) == 1, "run.stalled is logged once"
    (recovered,) = _lines(log, "run.recovered")
    assert recovered["detail"]["to"] == "ok"


async def test_a_degraded_run_that_stalls_recovers_to_degraded(world: World) -> None:
    """A stall is not a cure: the run was degraded by a retry, so moving again puts it back to
    ``degraded``, not ``ok``."""
    world.register(world.scripted.action("test.flaky"))
    world.scripted["test.flaky"].answers = [{"ok": False, "retry": True, "error": "relay is down"}]
    run_id = await world.seed_run([phase("main", step("test.flaky"))])
    await world.tick(T0)
    assert (await world.run(run_id))["health"] == "degraded"

    # The retry was due 30 s in; nobody ticked until well past the window.
    await world.tick(later((30 + STALL_AFTER + 5) * 1000))
    run = await world.run(run_id)
    assert (run["status"], run["health"]) == ("completed", "degraded")
    log = await world.log(run_id)
    (stalled,) = _lines(log, "run.stalled")
    assert stalled["detail"]["from"] == "degraded"
    (recovered,) = _lines(log, "run.recovered")
    assert recovered["detail"]["to"] == "degraded"


async def _die_holding(world: World, step_id: int, attempts: int, at: dt.datetime) -> None:
    """A runner claimed the step (counting an attempt) and died: its lease ran out at ``at``."""
    await world.set_step(
        step_id, status="running", claimed_by="dead:1", claim_expires_at=at, attempts=attempts
    )


async def test_a_step_whose_runner_keeps_dying_stalls_its_run(world: World) -> None:
    """The reclaim hands the same step back a second time: the run is stalled (logged once,
    naming the step), and it recovers when the step finally settles."""
    world.register(world.scripted.action("test.crashy"))
    run_id = await world.seed_run([phase("main", step("test.crashy"))], status="running")
    (s,) = await world.steps_of(run_id)
    # Another runner holds the run's lease (the reclaim drops only the dead runner's), so the
    # tick cannot take the run yet: only the reclaim acts on it.
    await world.set_run(run_id, claimed_by="other:2", claim_expires_at=later(3_600_000), wake_at=None)

    await _die_holding(world, s["id"], 1, later(-1000))
    report = await world.tick(T0)
    assert report.reclaimed == 1
    assert (await world.run(run_id))["health"] == "ok", "one death is not a pattern"

    await _die_holding(world, s["id"], 2, later(1000))
    await world.tick(later(2000))
    run = await world.run(run_id)
    assert run["health"] == "stalled"
    (stalled,) = _lines(await world.log(run_id), "run.stalled")
    assert stalled["detail"] == {"reason": "reclaimed", "step_id": s["id"], "reclaims": 2, "from": "ok"}

    # The other runner's run lease runs out; the next tick dispatches the step and it succeeds.
    await world.tick(later(3_601_000))
    run = await world.run(run_id)
    assert (run["status"], run["health"]) == ("completed", "ok")
    assert len(_lines(await world.log(run_id), "run.stalled")) == 1
    assert len(world.scripted["test.crashy"].calls) == 1


async def test_a_stalled_step_given_up_by_the_reclaim_clears_the_stall_and_degrades(world: World) -> None:
    """The third death spends the last attempt: the step is failed and its ``on_failure`` acts,
    which is the run moving: the stall is cleared first, so the failure's degradation holds."""
    world.register(world.scripted.action("test.crashy"), world.scripted.action("test.after"))
    run_id = await world.seed_run(
        [phase("main", step("test.crashy", on_failure="skip"), step("test.after"))], status="running"
    )
    s = (await world.steps_of(run_id))[0]
    # Held by another runner: the reclaim alone acts on the run (as above).
    await world.set_run(run_id, claimed_by="other:2", claim_expires_at=later(3_600_000), wake_at=None)
    for death in range(1, MAX_ATTEMPTS):
        await _die_holding(world, s["id"], death, later(death * 1000))
        await world.tick(later(death * 1000 + 500))
    assert (await world.run(run_id))["health"] == "stalled"

    await _die_holding(world, s["id"], MAX_ATTEMPTS, later(10_000))
    report = await world.tick(later(10_500))
    assert report.gave_up == 1
    run = await world.run(run_id)
    assert run["health"] == "degraded", "a stalled run whose step is given up is degraded, not stalled"
    kinds = [k for k in await world.kinds(run_id) if k in ("run.stalled", "run.recovered", "run.degraded")]
    assert kinds == ["run.stalled", "run.recovered", "run.degraded"]
