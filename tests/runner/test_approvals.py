"""Risk decides (issue 29 item 4, ``runner.approvals``): a step whose action's risk is at or above
``approve_from`` is not performed until staff approve it, then once, with the step's own
idempotency key; a skipped one never is. On SQLite and MariaDB (the ``engine`` fixture)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from actions.delivery import DeliveryError, RecordingDelivery, approval_requester
from runner.answers import Reason
from runner.approvals import AWAITING, needs_approval
from runner.engine import RunnerSettings
from runner.history import Actor
from runner.registry import Envelope
from runner.states import RunStatus, StepStatus
from runner.views import StepContext
from tests.support.actions import build_action
from tests.support.world import T0, World, phase, step

MOD = Actor("1", "Mod")
OTHER = Actor("2", "Other mod")


class Arena:
    """What the risky actions change: each request recorded with its idempotency key."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    async def wipe(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        self.requests.append(("wipe", envelope.idempotency_key))
        return {"ok": True}

    async def kick(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        self.requests.append(("kick", envelope.idempotency_key))
        return {"ok": True}

    async def say(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        self.requests.append(("say", envelope.idempotency_key))
        return {"ok": True}

    def count(self, kind: str) -> int:
        return sum(1 for done, _ in self.requests if done == kind)


async def _no_context(run_id: int, step_id: int) -> StepContext | None:
    return None


def arena_world(
    engine: AsyncEngine, approve_from: str = "destructive"
) -> tuple[World, Arena, RecordingDelivery]:
    world = World(engine, settings=RunnerSettings(approve_from=approve_from))
    arena = Arena()
    world.register(
        dataclasses.replace(build_action("arena.wipe", arena.wipe), risk="destructive"),
        dataclasses.replace(build_action("arena.kick", arena.kick), risk="moderate"),
        build_action("arena.say", arena.say),
    )
    delivery = RecordingDelivery()
    world.runner.ctx.request_approval = approval_requester(delivery, _no_context)
    return world, arena, delivery


def wiping() -> list[dict[str, Any]]:
    return [phase("finale", step("arena.wipe", label="wipe the arena"), step("arena.say", label="say bye"))]


async def _step(world: World, run_id: int, action_id: str) -> Any:
    return next(s for s in await world.steps_of(run_id) if s["action_id"] == action_id)


def test_the_threshold_orders_the_risks() -> None:
    assert needs_approval("destructive", "destructive") and not needs_approval("moderate", "destructive")
    assert needs_approval("moderate", "moderate") and needs_approval("destructive", "moderate")
    assert not needs_approval("notify", "moderate") and not needs_approval("none", "moderate")
    assert not needs_approval("destructive", "never")


async def test_a_destructive_step_is_not_performed_until_approved_then_once_with_its_own_key(
    engine: AsyncEngine,
) -> None:
    world, arena, delivery = arena_world(engine)
    run_id = await world.seed_run(wiping())
    await world.tick()
    await world.tick(T0 + dt.timedelta(minutes=5))
    assert arena.count("wipe") == 0, "not performed before an approval"
    assert arena.count("say") == 0, "the run waits at the step, as at a cue"
    [request] = delivery.approvals
    wipe = await _step(world, run_id, "arena.wipe")
    assert (
        request.step_id == wipe["id"] and request.risk == "destructive" and request.label == "wipe the arena"
    )
    assert request.idempotency_key != wipe["idempotency_key"], "the action's own key is kept for the action"
    assert wipe["status"] == StepStatus.RUNNING and wipe["claim_expires_at"] is None, "parked"
    assert wipe["result"]["approval"] == AWAITING and wipe["result"]["posted"]["message_id"]

    approved = await world.controls.approve(wipe["id"], actor=MOD)
    assert approved.ok and approved.reason is Reason.APPROVED
    await world.tick()
    await world.tick(T0 + dt.timedelta(minutes=10))
    assert arena.requests[0] == ("wipe", wipe["idempotency_key"])
    assert arena.count("wipe") == 1 and arena.count("say") == 1
    wipe = await _step(world, run_id, "arena.wipe")
    assert wipe["status"] == StepStatus.DONE
    assert (wipe["approved_by_id"], wipe["approved_by_name"]) == ("1", "Mod")
    assert len(delivery.approvals) == 1, "asked once"
    kinds = await world.kinds(run_id)
    assert kinds.count("step.approved") == 1 and kinds.count("step.parked") == 1
    assert (await world.run(run_id))["status"] == RunStatus.COMPLETED


async def test_two_approve_clicks_perform_the_step_once(engine: AsyncEngine) -> None:
    world, arena, _ = arena_world(engine)
    run_id = await world.seed_run(wiping())
    await world.tick()
    wipe = await _step(world, run_id, "arena.wipe")
    first, second = await asyncio.gather(
        world.controls.approve(wipe["id"], actor=MOD), world.controls.approve(wipe["id"], actor=OTHER)
    )
    assert sorted([first.ok, second.ok]) == [False, True]
    again = await world.controls.approve(wipe["id"], actor=OTHER)
    winner = MOD if first.ok else OTHER
    assert not again.ok and again.reason is Reason.ALREADY_APPROVED and again.by == winner
    await world.tick()
    late = await world.controls.approve(wipe["id"], actor=OTHER)
    assert not late.ok and late.reason is Reason.ALREADY_APPROVED
    await world.tick(T0 + dt.timedelta(minutes=1))
    assert arena.count("wipe") == 1
    assert (await world.kinds(run_id)).count("step.approved") == 1


async def test_a_skipped_approval_is_never_performed_and_the_run_carries_on(engine: AsyncEngine) -> None:
    world, arena, _ = arena_world(engine)
    run_id = await world.seed_run(wiping())
    await world.tick()
    wipe = await _step(world, run_id, "arena.wipe")
    skipped = await world.controls.skip(wipe["id"], actor=MOD, parked_only=True)
    assert skipped.ok
    late = await world.controls.approve(wipe["id"], actor=OTHER)
    assert not late.ok and late.reason is Reason.ALREADY_SKIPPED
    await world.tick()
    await world.tick(T0 + dt.timedelta(minutes=5))
    assert arena.count("wipe") == 0 and arena.count("say") == 1
    assert (await _step(world, run_id, "arena.wipe"))["status"] == StepStatus.SKIPPED
    assert (await world.run(run_id))["status"] == RunStatus.COMPLETED


@pytest.mark.parametrize(("approve_from", "waits"), [("destructive", False), ("moderate", True)])
async def test_a_moderate_step_waits_only_when_approve_from_is_moderate(
    engine: AsyncEngine, approve_from: str, waits: bool
) -> None:
    world, arena, delivery = arena_world(engine, approve_from)
    run_id = await world.seed_run([phase("p", step("arena.kick"), step("arena.say"))])
    await world.tick()
    assert arena.count("kick") == (0 if waits else 1)
    assert len(delivery.approvals) == (1 if waits else 0)
    if waits:
        kick = await _step(world, run_id, "arena.kick")
        assert (await world.controls.approve(kick["id"], actor=MOD)).ok
        await world.tick()
        assert arena.count("kick") == 1
    assert (await world.run(run_id))["status"] == RunStatus.COMPLETED


async def test_never_runs_every_step_without_asking(engine: AsyncEngine) -> None:
    world, arena, delivery = arena_world(engine, "never")
    await world.seed_run(wiping())
    await world.tick()
    assert arena.count("wipe") == 1 and delivery.approvals == []


async def test_approve_refuses_a_cue_and_a_step_not_reached_and_changes_nothing(engine: AsyncEngine) -> None:
    world, _, _ = arena_world(engine)

    async def cue(envelope: Envelope, params: Any) -> dict[str, Any]:
        return {"ok": True, "await": "human"}

    world.register(build_action("arena.cue", cue))
    run_id = await world.seed_run([phase("p", step("arena.cue"), step("arena.wipe"))])
    await world.tick()
    cue_step, wipe = await world.steps_of(run_id)
    for step_id in (cue_step["id"], wipe["id"]):
        refused = await world.controls.approve(step_id, actor=MOD)
        assert not refused.ok and refused.reason is Reason.NOT_AWAITING_APPROVAL
    assert [s["status"] for s in await world.steps_of(run_id)] == [StepStatus.RUNNING, StepStatus.PENDING]
    assert "step.approved" not in await world.kinds(run_id)
    assert not (await world.controls.approve(10**6, actor=MOD)).ok


async def test_an_approval_request_that_fails_for_a_while_is_asked_again_then_waits(
    engine: AsyncEngine,
) -> None:
    world, arena, delivery = arena_world(engine)
    delivery.fail_next("Discord is restarting", transient=True)
    run_id = await world.seed_run(wiping())
    await world.tick()
    assert delivery.approvals == [] and arena.count("wipe") == 0
    assert (await _step(world, run_id, "arena.wipe"))["status"] == StepStatus.PENDING
    await world.tick(T0 + dt.timedelta(seconds=world.runner.ctx.settings.retry_seconds + 1))
    assert len(delivery.approvals) == 1 and arena.count("wipe") == 0


async def test_an_approval_channel_refused_for_good_fails_the_step_without_performing_it(
    engine: AsyncEngine,
) -> None:
    world, arena, delivery = arena_world(engine)
    delivery.failures.append(DeliveryError("no approval channel", transient=False))
    run_id = await world.seed_run(wiping())
    await world.tick()
    wipe = await _step(world, run_id, "arena.wipe")
    assert wipe["status"] == StepStatus.FAILED and "no approval channel" in wipe["last_error"]
    assert arena.count("wipe") == 0


async def test_a_confirm_never_settles_a_step_waiting_for_its_approval(engine: AsyncEngine) -> None:
    """A step parked on its approval request is parked as a cue is, so a cue's confirm would take
    it and settle it ``done``: the run would move on as if the destructive action had run. Only
    approve or skip answer it."""
    world, arena, _ = arena_world(engine)
    run_id = await world.seed_run(wiping())
    await world.tick()
    wipe = await _step(world, run_id, "arena.wipe")
    refused = await world.controls.confirm(wipe["id"], actor=MOD)
    assert not refused.ok and refused.reason is Reason.AWAITS_APPROVAL
    assert (await _step(world, run_id, "arena.wipe"))["status"] == StepStatus.RUNNING
    assert (await world.controls.approve(wipe["id"], actor=MOD)).ok
    await world.tick()
    assert arena.count("wipe") == 1
