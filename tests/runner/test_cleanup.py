"""The cleanup ledger (issue 29 item 5, ``runner.engine.cleanup``): what a run did that can be
undone is recorded with its step, and a cancel with cleanup undoes it in reverse order, each
entry once, across a crash between the request and the settle and with two runners ticking.
On SQLite and MariaDB (the ``engine`` fixture)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import sqlalchemy as sa

from runner.engine import Runner
from runner.history import Actor
from runner.registry import Envelope
from runner.schema import run_undos
from runner.states import CleanupStatus, UndoStatus
from tests.support.actions import build_action
from tests.support.world import T0, World, phase, step

MOD = Actor("1", "Mod")


class Game:
    """A game server the actions change: spawns and despawns, each request recorded with its
    idempotency key (a receiver that deduplicates by key counts each once)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.fail_despawn: list[Any] = []

    async def spawn(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        name = envelope.params["name"]
        self.requests.append(("spawn", name, envelope.idempotency_key))
        return {
            "ok": True,
            "undo": {"action": "game.despawn", "params": {"name": name}, "label": f"despawn {name}"},
        }

    async def despawn(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        self.requests.append(("despawn", envelope.params["name"], envelope.idempotency_key))
        if self.fail_despawn:
            answer = self.fail_despawn.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return dict(answer)
        return {"ok": True}

    async def reward(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        self.requests.append(("reward", envelope.params["name"], envelope.idempotency_key))
        return {"ok": True}

    def despawned(self) -> list[str]:
        return [name for kind, name, _ in self.requests if kind == "despawn"]


async def waits_for_a_human(envelope: Envelope, params: Any) -> dict[str, Any]:
    """Parks the run (as a GM cue does), so it is still in flight when staff cancel it."""
    return {"ok": True, "await": "human"}


def game_world(world: World, game: Game) -> None:
    actions = [
        dataclasses.replace(build_action("game.spawn", game.spawn), reversible="automatic", risk="moderate"),
        build_action("game.despawn", game.despawn),
        dataclasses.replace(build_action("game.reward", game.reward), reversible="manual", risk="moderate"),
        dataclasses.replace(build_action("game.say", game.reward), reversible="manual", risk="notify"),
        build_action("game.wait_for_gm", waits_for_a_human),
    ]
    world.register(*actions)


def spawning(*names: str, then_wait: bool = True) -> list[dict[str, Any]]:
    """A phase that spawns ``names``, then waits for the GM (the run stays in flight)."""
    steps = [step("game.spawn", {"name": n}, label=f"spawn {n}") for n in names]
    if then_wait:
        steps.append(step("game.wait_for_gm"))
    return [phase("invasion", *steps)]


async def undos(world: World, run_id: int) -> list[sa.RowMapping]:
    async with world.engine.connect() as conn:
        query = sa.select(run_undos).where(run_undos.c.run_id == run_id).order_by(run_undos.c.id)
        return list((await conn.execute(query)).mappings())


async def started(world: World, phases: list[dict[str, Any]]) -> int:
    run_id = await world.seed_run(phases)
    await world.tick()
    return run_id


async def test_a_reversible_step_records_its_undo_once_with_the_step(world: World) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(world, spawning("warlord", "minion"))
    entries = await undos(world, run_id)
    assert [(e["action_id"], e["params"], e["status"]) for e in entries] == [
        ("game.despawn", {"name": "warlord"}, UndoStatus.RECORDED),
        ("game.despawn", {"name": "minion"}, UndoStatus.RECORDED),
    ]
    assert entries[0]["label"] == "despawn warlord"
    assert all(e["idempotency_key"].endswith("-undo") for e in entries)
    await world.tick(T0 + dt.timedelta(seconds=10))
    assert len(await undos(world, run_id)) == 2, "a later tick records nothing again"
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.NOT_REQUIRED


async def test_a_cancel_with_cleanup_undoes_in_reverse_order_each_once(world: World) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(world, spawning("warlord", "minion", "boss"))
    cancelled = await world.controls.cancel(run_id, reason="players left", actor=MOD, cleanup=True)
    assert cancelled.ok
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.PENDING
    await world.tick()
    assert game.despawned() == ["boss", "minion", "warlord"], "latest first"
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.DONE
    await world.tick()
    await world.tick()
    assert game.despawned() == ["boss", "minion", "warlord"], "each once, whatever ticks follow"
    kinds = await world.kinds(run_id)
    assert kinds.count("undo.done") == 3 and kinds.count("cleanup.finished") == 1
    assert "cleanup.started" in kinds


async def test_a_cancel_without_cleanup_undoes_nothing(world: World) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(world, spawning("warlord"))
    assert (await world.controls.cancel(run_id, reason="keep the boss", actor=MOD)).ok
    await world.tick()
    assert game.despawned() == []
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.NOT_REQUIRED


async def test_a_manual_action_is_listed_for_staff_and_never_run(world: World) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(
        world,
        [
            phase(
                "end", step("game.reward", {"name": "loot"}, label="give the loot"), step("game.wait_for_gm")
            )
        ],
    )
    [entry] = await undos(world, run_id)
    assert (
        entry["status"] == UndoStatus.MANUAL
        and entry["label"] == "give the loot"
        and entry["action_id"] is None
    )
    await world.controls.cancel(run_id, reason="stop", actor=MOD, cleanup=True)
    await world.tick()
    assert [kind for kind, _, _ in game.requests] == ["reward"], "nothing ran for the manual entry"
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.DONE


async def test_a_message_the_bot_posted_is_not_listed_for_staff_to_undo(world: World) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(
        world, [phase("end", step("game.say", {"name": "hello"}), step("game.wait_for_gm"))]
    )
    assert await undos(world, run_id) == []


async def test_a_transient_failure_is_retried_and_a_terminal_one_fails_the_cleanup_but_not_the_rest(
    world: World,
) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(world, spawning("warlord", "minion"))
    # The minion's despawn (first, latest) fails once for a while, then for good.
    game.fail_despawn = [
        {"ok": False, "error": "server restarting"},
        {"ok": False, "retry": False, "error": "no such mob"},
    ]
    await world.controls.cancel(run_id, reason="stop", actor=MOD, cleanup=True)
    await world.tick()
    assert game.despawned() == ["minion"], "the earlier entry waits for the later one"
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.PENDING
    await world.tick(T0 + dt.timedelta(seconds=world.runner.ctx.settings.retry_seconds + 1))
    assert game.despawned() == ["minion", "minion", "warlord"]
    entries = {e["params"]["name"]: e for e in await undos(world, run_id)}
    assert (
        entries["minion"]["status"] == UndoStatus.FAILED and entries["minion"]["last_error"] == "no such mob"
    )
    assert entries["warlord"]["status"] == UndoStatus.DONE
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.FAILED


async def test_defect_an_undo_whose_runner_died_mid_request_is_sent_again_with_the_same_key_and_attempts_kept(
    world: World,
) -> None:
    """A runner that dies between the undo's request and its settle leaves the claim to run out;
    the next runner sends the same idempotency key (the receiver's dedup makes it once) and the
    attempt count goes on from where it was (the seeds' reclaim reset it once)."""
    game = Game()
    game_world(world, game)
    run_id = await started(world, spawning("warlord"))
    game.fail_despawn = [SystemExit("the process dies mid-request")]
    await world.controls.cancel(run_id, reason="stop", actor=MOD, cleanup=True)
    try:
        await world.tick()
    except BaseException as exc:  # the simulated death escapes the tick, as it would the process
        assert isinstance(exc, SystemExit)
    [entry] = await undos(world, run_id)
    assert entry["status"] == UndoStatus.RUNNING and entry["attempts"] == 1
    other = Runner(
        world.engine,
        world.registry,
        clock=world.clock,
        owner="host:other",
        settings=world.runner.ctx.settings,
    )
    await other.tick()
    assert game.despawned() == ["warlord"], "not taken over while the claim lasts"
    world.clock.set(T0 + dt.timedelta(minutes=5))
    await other.tick()
    keys = [key for kind, _, key in game.requests if kind == "despawn"]
    assert len(keys) == 2 and keys[0] == keys[1], "the same key both times"
    [entry] = await undos(world, run_id)
    assert entry["status"] == UndoStatus.DONE and entry["attempts"] == 2
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.DONE


async def test_two_runners_ticking_at_once_undo_each_entry_once(world: World) -> None:
    game = Game()
    game_world(world, game)
    run_id = await started(world, spawning(*(f"mob{i}" for i in range(8))))
    await world.controls.cancel(run_id, reason="stop", actor=MOD, cleanup=True)
    other = Runner(
        world.engine,
        world.registry,
        clock=world.clock,
        owner="host:other",
        settings=world.runner.ctx.settings,
    )
    for _ in range(4):
        await asyncio.gather(world.runner.tick(), other.tick())
    assert sorted(game.despawned()) == sorted(f"mob{i}" for i in range(8))
    assert len(game.despawned()) == 8, "no entry undone twice"
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.DONE
