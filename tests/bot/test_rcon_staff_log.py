"""An ``rcon.command`` step through the real bot (issue 29 item 3): the game server's reply is
kept on the step and shown in the staff log line of that step, on one line, with the command."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.cogs.staff_log._lines import log_line
from runner.views import PhaseView, RunView, StepView
from tests.actions.test_rcon import PASSWORD, Game
from tests.bot.conftest import TICK, Sim
from tests.bot.test_rendering import NAME, RUN, entry
from tests.bot.test_staff_log import log_lines, words
from tests.support.definitions import event, phase, step, wait
from wiring.game_targets import RconServer


@pytest.fixture
async def game() -> AsyncIterator[Game]:
    served = Game()
    await served.start()
    try:
        yield served
    finally:
        await served.stop()


async def test_the_staff_log_shows_the_command_and_the_servers_reply(
    sim: Sim, game: Game, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTBOT_TEST_RCON_PASSWORD", PASSWORD)
    survival = RconServer(host="127.0.0.1", port=game.port, password_env="EVENTBOT_TEST_RCON_PASSWORD")
    await sim.start_bot(sim.config.model_copy(update={"rcon": {"survival": survival}}))
    # A reply over two lines: one staff-log line all the same.
    game.reply = "Summoned new Shadow Warlord\nat gate-north"
    spec = event(
        "warlord",
        phase(
            "battle",
            step(
                "rcon.command",
                {"server": "survival", "command": "/spawn shadow-warlord gate-north"},
                label="Bring out the Warlord",
            ),
            wait(3600),
        ),
        title="Invasion",
    )
    await sim.publish(spec)
    await sim.mod.slash(sim.staff, "event start", definition="warlord")
    await sim.env.advance_time(TICK)
    await sim.env.advance_time(TICK)
    assert game.commands == ["/spawn shadow-warlord gate-north"]
    run = await sim.only_run()
    [spawned] = [s for p in run.phases for s in p.steps if s.action_id == "rcon.command"]
    assert spawned.result["reply"] == "Summoned new Shadow Warlord\nat gate-north"
    said = [words(line) for line in log_lines(sim) if "🎮" in line]
    assert len(said) == 1, log_lines(sim)
    assert said[0].endswith(
        "(Bring out the Warlord) sent `/spawn shadow-warlord gate-north` to rcon survival; "
        "it answered “Summoned new Shadow Warlord at gate-north”"
    )


def _run_with(result: dict[str, Any] | None) -> RunView:
    spawn = StepView(
        9, "battle", 1, "Spawn the Warlord", "rcon.command", "done", False, None, 1, None, None, result
    )
    return dataclasses.replace(RUN, phases=[PhaseView("battle", "Battle", True, [spawn])])


def test_a_rehearsal_run_says_what_it_would_have_sent_and_an_unread_result_says_nothing() -> None:
    """A rehearsal in Discord connects to nothing: its line says so. A step whose result is gone
    (pruned by retention) or is not the action's shape gets no line rather than a broken one."""
    done = entry("step.done", line_step=9, action="rcon.command", attempts=1)
    rehearsed = _run_with({"would_send": "survival", "command": "/spawn shadow-warlord gate-north"})
    assert log_line(done, rehearsed) == (
        f"🎮 {NAME}: step 9 (Spawn the Warlord) would have sent `/spawn shadow-warlord gate-north` to rcon survival"
    )
    assert log_line(done, _run_with(None)) is None
    assert log_line(done, _run_with({"unexpected": True})) is None
    silent = _run_with({"server": "survival", "command": "say `hi`", "reply": ""})
    assert (
        log_line(done, silent)
        == f"🎮 {NAME}: step 9 (Spawn the Warlord) sent `say 'hi'` to rcon survival; it answered nothing"
    )
