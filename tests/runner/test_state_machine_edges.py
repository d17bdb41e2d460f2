"""Regression tests for the runner's state-machine defects of issue 8 (defects 1, 2, 14, 16).

Each test is named for the defect it pins and runs on both backends (the ``engine`` fixture).
Its docstring says what happened before the fix and what must happen now.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa

from actions.delivery import Cue, Posted, RecordingDelivery, cue_closer
from actions.messaging import cue_action
from runner import views
from runner.engine import Runner
from runner.schedule import MAX_OCCURRENCES_PER_PASS
from runner.schema import definitions, runs
from tests.support.definitions import cron as on_cron
from tests.support.definitions import event
from tests.support.world import T0, World, later, phase, step
from wiring.control_text import closed_cue_text
from wiring.control_text import control_text as said

MINUTE = dt.timedelta(minutes=1)


async def scheduled_runs(world: World) -> list[sa.Row[Any]]:
    async with world.engine.connect() as conn:
        query = sa.select(runs.c.scheduled_for, runs.c.status).order_by(runs.c.scheduled_for)
        return list((await conn.execute(query)).all())


async def materialised_until(world: World) -> dt.datetime | None:
    async with world.engine.connect() as conn:
        return (await conn.execute(sa.select(definitions.c.materialised_until))).scalar()


def often(cron: str, **over: Any) -> dict[str, Any]:
    """The one-step definition these tests schedule; ``over`` for a later version of it."""
    return event("often", phase("main", step("test.noop")), schedule=on_cron(cron), grace_seconds=120, **over)


async def publish_cron(world: World, cron: str) -> None:
    world.register(world.scripted.action("test.noop"))
    await world.publish(often(cron))


# ── Defect 1: silent loss of scheduled occurrences ───────────────────────────


@pytest.mark.slow
async def test_defect_01_a_15_minute_cron_ticked_for_48_hours_runs_every_occurrence(world: World) -> None:
    """Before: one materialise pass created at most 50 occurrences but recorded the whole 24 h
    lookahead as materialised, so a cron every 15 minutes ticked every 5 minutes for 48 h made
    146 runs instead of 192, with an 11 h 45 min gap nobody was told about. Now every occurrence
    becomes a run (and, ticked on time, completes): the 192 after publishing, and the one at
    the instant of publishing."""
    await publish_cron(world, "*/15 * * * *")
    end = T0 + dt.timedelta(hours=48)
    moment = T0
    while moment <= end:
        await world.tick(moment)
        moment += 5 * MINUTE

    due = [row for row in await scheduled_runs(world) if row.scheduled_for <= end]
    expected = [T0 + k * 15 * MINUTE for k in range(48 * 4 + 1)]
    assert [row.scheduled_for for row in due] == expected, "no occurrence may be dropped"
    assert {row.status for row in due} == {"completed"}


async def test_defect_01_a_5_minute_cron_keeps_running_after_its_first_50(world: World) -> None:
    """Before: a cron with more than 50 occurrences in the 24 h lookahead (the issue's
    every-minute cron; every 5 minutes, the most often a definition may now fire, has 288)
    produced 50 runs, then nothing for most of a day, because the bookkeeping jumped to the end
    of the lookahead. Now ``materialised_until`` only advances to the last occurrence actually
    created; the rest is picked up on the next pass, so every 5 minutes of ten hours has its
    run."""
    every = 5 * MINUTE
    await publish_cron(world, "*/5 * * * *")
    await world.tick(T0)
    # The first of the 50 is the occurrence at the instant of publishing.
    assert await materialised_until(world) == T0 + (MAX_OCCURRENCES_PER_PASS - 1) * every, (
        "a pass stopped by its cap records only as far as it reached"
    )
    ticks = 10 * 12
    for k in range(1, ticks + 1):
        await world.tick(T0 + k * every)

    done = [row for row in await scheduled_runs(world) if row.scheduled_for <= T0 + ticks * every]
    assert [row.scheduled_for for row in done] == [T0 + k * every for k in range(ticks + 1)]
    assert {row.status for row in done} == {"completed"}
    ahead = await materialised_until(world)
    assert ahead is not None and ahead >= T0 + ticks * every + dt.timedelta(hours=12), (
        "caught up: at least half the lookahead is worked out ahead, as for any definition"
    )


async def test_defect_01_an_occurrence_at_the_instant_of_publishing_is_not_dropped(world: World) -> None:
    """Before: occurrences were worked out after the publish instant, exclusive, so a cron that
    fell due at the very moment the definition was published was neither a run nor missed. Now
    the first pass includes it (and a second pass does not create it again)."""
    world.clock.set(T0 + 15 * MINUTE)
    await publish_cron(world, "*/15 * * * *")
    await world.tick()
    await world.tick(T0 + 20 * MINUTE)
    rows = await scheduled_runs(world)
    assert rows[0].scheduled_for == T0 + 15 * MINUTE
    assert rows[0].status == "completed"
    assert [row.scheduled_for for row in rows[:2]] == [T0 + 15 * MINUTE, T0 + 30 * MINUTE]


async def test_defect_01b_publishing_a_new_version_keeps_the_occurrences_the_old_one_had_not_reached(
    world: World,
) -> None:
    """Found by the model-based test. Before: publishing a new version reset the bookkeeping
    and worked occurrences out from the new version's publishing instant, so when the runner
    had not ticked for a while (the bot was down), every occurrence between the last one worked
    out and the publish was neither a run nor missed. Now those are created under the version
    that was in force at their moment (and marked missed, being past their grace), and the new
    version takes over from its publishing instant."""
    await publish_cron(world, "*/15 * * * *")
    await world.tick(T0)
    ahead = await materialised_until(world)
    assert ahead is not None
    # Down for two days, then a new version is published before the first tick.
    down_until = ahead + dt.timedelta(hours=24)
    world.clock.set(down_until)
    first_version = (await scheduled_version_ids(world))[0]
    await world.publish(often("*/15 * * * *", title="Often, renamed"))
    for _ in range(60):  # a pass creates at most 50: let it catch up
        await world.tick(down_until)

    rows = await scheduled_runs(world)
    moments = [row.scheduled_for for row in rows if row.scheduled_for <= down_until]
    expected = [T0 + k * 15 * MINUTE for k in range(int((down_until - T0) / (15 * MINUTE)) + 1)]
    assert moments == expected, "every occurrence of the downtime is a run"
    late = {row.status for row in rows if ahead < row.scheduled_for < down_until - 2 * MINUTE}
    assert late == {"missed"}, "past their grace: marked missed, never started late"
    versions_by_moment = dict(await scheduled_version_ids(world, with_moments=True))
    assert versions_by_moment[down_until - 15 * MINUTE] == first_version, (
        "an occurrence before the publish belongs to the version in force then"
    )
    assert versions_by_moment[down_until] != first_version, "the new version takes over at its publishing"


async def test_defect_01c_a_pass_after_a_publish_does_not_spend_its_budget_on_runs_that_exist(
    world: World,
) -> None:
    """Found by the model-based test. Before: after a new version, the next pass walked again
    the occurrences the old version had already created, and counted them against its budget of
    50, so a tick 13 hours on created nothing although two occurrences were due. Now only runs a
    pass really creates count, and every due occurrence is a run after one tick."""
    await publish_cron(world, "*/15 * * * *")
    await world.tick(T0)  # 50 occurrences: T0 to T0 + 12 h 15 min
    await world.publish(often("*/15 * * * *", title="Often, v2"))
    later_on = T0 + dt.timedelta(hours=13)
    await world.tick(later_on)
    moments = {row.scheduled_for for row in await scheduled_runs(world)}
    due = {T0 + k * 15 * MINUTE for k in range(13 * 4 + 1)}
    assert due <= moments, f"due occurrences left uncreated: {sorted(due - moments)[:3]}"


async def scheduled_version_ids(world: World, *, with_moments: bool = False) -> list[Any]:
    async with world.engine.connect() as conn:
        query = sa.select(runs.c.scheduled_for, runs.c.version_id).order_by(runs.c.scheduled_for)
        rows = (await conn.execute(query)).all()
    return [(r.scheduled_for, r.version_id) for r in rows] if with_moments else [r.version_id for r in rows]


# ── Defect 2: cancel while a cue is being posted ─────────────────────────────


@dataclass
class CancellingDelivery(RecordingDelivery):
    """Posts the cue, but a moderator's ``/event cancel`` lands while it is being posted."""

    world: World | None = None
    cancels: list[Any] = field(default_factory=list)

    async def post_cue(self, cue: Cue) -> Posted:
        assert self.world is not None
        self.cancels.append(await self.world.controls.cancel(cue.run_id, reason="wrong world", actor="mod"))
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
        refused = await world.controls.settle_cue(cue["id"], verb, actor="gm")
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
        assert (await world.controls.cancel(envelope.run_id, reason="stop", actor="mod")).ok
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
        await world.controls.confirm(cue["id"], actor="gm"),
        await world.controls.skip(cue["id"], actor="gm"),
    ):
        assert not refused.ok
        assert "the run was cancelled" in said(refused)
    assert (await world.steps_of(run_id))[0]["status"] == "running", "nothing changed"


async def test_defect_02_a_cue_posted_while_its_run_was_paused_still_parks(world: World) -> None:
    """The guard takes only ended runs: a pause pressed while a cue is being posted leaves the
    cue parked (a GM may confirm it; the run carries on when resumed), as before."""

    async def pause_then_park(envelope: Any, params: Any) -> dict[str, Any]:
        assert (await world.controls.pause(envelope.run_id, actor="mod")).ok
        return {"ok": True, "await": "human"}

    world.register(world.scripted.action("gm.cue", perform=pause_then_park))
    run_id = await world.seed_run([phase("main", step("gm.cue"))])
    await world.tick(T0)
    (cue,) = await world.steps_of(run_id)
    assert (cue["status"], cue["claim_expires_at"]) == ("running", None)
    confirmed = await world.controls.confirm(cue["id"], actor="gm")
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
    assert (await world.controls.confirm(cue["id"], actor="gm")).ok
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
            refused = await world.controls.settle_cue(step_id, verb, actor="gm")
            assert not refused.ok, (step_id, verb)
    assert not (await world.controls.settle_cue(cue["id"], "delete", actor="gm")).ok
    assert [s["status"] for s in await world.steps_of(cued)] == ["running", "pending", "pending"]
    assert (await world.steps_of(other))[0]["status"] == "running"
    assert "step.skipped" not in await world.kinds(cued)

    assert (await world.controls.settle_cue(cue["id"], "skip", actor="gm")).ok, "the posted cue itself may"
    again = await world.controls.settle_cue(cue["id"], "confirm", actor="gm")
    assert not again.ok and said(again) == "already skipped by gm", "an earlier cue is told what happened"
