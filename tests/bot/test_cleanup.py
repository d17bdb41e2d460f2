"""A cancel with cleanup, through the real bot (issue 29 item 5): ``/event cancel`` undoes what
the run did to the game, the staff log says so line by line, and ``/event status`` shows how far
the cleanup got and what is left to undo by hand."""

from __future__ import annotations

import dataclasses
from typing import Any

from runner import catalog
from runner.definitions import EventDefinition
from runner.registry import Envelope
from tests.bot.conftest import TICK, Sim
from tests.bot.test_staff_log import log_lines, words
from tests.support.actions import build_action
from tests.support.definitions import event, phase, step, wait


class Game:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    async def spawn(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        if envelope.verify:  # preflight checks every step before a start, acting on nothing
            return {"ok": True}
        self.requests.append(("spawn", envelope.params["name"]))
        undo = {"action": "game.despawn", "params": {"name": envelope.params["name"]}}
        return {"ok": True, "undo": undo | {"label": f"despawn {envelope.params['name']}"}}

    async def despawn(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        if envelope.verify:  # preflight checks every step before a start, acting on nothing
            return {"ok": True}
        self.requests.append(("despawn", envelope.params["name"]))
        return {"ok": True}

    async def fence(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        if envelope.verify:  # preflight checks every step before a start, acting on nothing
            return {"ok": True}
        self.requests.append(("fence", envelope.params["name"]))
        return {"ok": True}


async def invasion(sim: Sim) -> Game:
    game = Game()
    sim.bot.services.registry.register(
        "game",
        [
            dataclasses.replace(
                build_action("game.spawn", game.spawn), reversible="automatic", risk="moderate"
            ),
            build_action("game.despawn", game.despawn),
            dataclasses.replace(build_action("game.fence", game.fence), reversible="manual", risk="moderate"),
        ],
    )
    spec = event(
        "invasion",
        phase(
            "gate",
            step("game.fence", {"name": "north gate"}, label="fence the north gate"),
            step("game.spawn", {"name": "warlord"}, label="spawn the warlord"),
            step("game.spawn", {"name": "minions"}, label="spawn the minions"),
            wait(3600),
        ),
        title="Invasion",
    )
    await catalog.publish(sim.engine, EventDefinition.model_validate(spec), sim.now())
    return game


async def test_a_cancel_with_cleanup_undoes_the_spawns_latest_first_and_tells_staff(sim: Sim) -> None:
    game = await invasion(sim)
    await sim.mod.slash(sim.staff, "event start", definition="invasion")
    await sim.env.advance_time(TICK)
    assert [kind for kind, _ in game.requests] == ["fence", "spawn", "spawn"]
    run = await sim.only_run()
    cancelled = await sim.mod.slash(sim.staff, "event cancel", run=run.id, reason="the server is lagging")
    assert cancelled.ephemeral
    await sim.env.advance_time(TICK * 2)
    assert game.requests[3:] == [("despawn", "minions"), ("despawn", "warlord")], "latest first, once each"
    said = [words(line) for line in log_lines(sim)]
    assert any(
        "cleanup started, 2 action(s) to undo" in line and "1 to undo by hand" in line for line in said
    )
    assert any("undone: despawn minions" in line for line in said)
    assert any("cleanup complete" in line for line in said)
    status = await sim.mod.slash(sim.staff, "event status", run=run.id)
    shown = status.response.embeds[0].description or ""
    assert "Cleanup: done, 2 of 2 undone" in shown and "to undo by hand: fence the north gate" in shown


async def test_a_cancel_with_cleanup_off_leaves_the_game_as_it_is(sim: Sim) -> None:
    game = await invasion(sim)
    await sim.mod.slash(sim.staff, "event start", definition="invasion")
    await sim.env.advance_time(TICK)
    run = await sim.only_run()
    await sim.mod.slash(sim.staff, "event cancel", run=run.id, reason="keep the boss", cleanup=False)
    await sim.env.advance_time(TICK * 2)
    assert [kind for kind, _ in game.requests] == ["fence", "spawn", "spawn"]
    assert not any("cleanup" in words(line) for line in log_lines(sim))
