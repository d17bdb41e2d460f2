"""Action plugins in the running bot (issue 29 item 1): a refused plugin is said at start-up and
by ``/event health``, and the bot starts and runs events all the same; a good plugin's action
runs in a live event like a built-in one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from tests.bot.conftest import TICK, Sim
from tests.support.plugins import EXAMPLE_PLUGIN, install, install_example

BROKEN = "plugin shop (eventbot-shop 1.0): could not be imported: ImportError: the shop needs its database"


async def test_a_refused_plugin_is_logged_at_start_up_and_shown_by_health_and_the_bot_runs(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install(
        monkeypatch,
        tmp_path,
        "eventbot-shop",
        {"shop": "shop_plugin:register"},
        {"shop_plugin": "raise ImportError('the shop needs its database')\n"},
    )
    caplog.set_level(logging.WARNING, logger="bot")
    with sim.env.time_context():
        await sim.start_bot()
    assert f"action plugin refused, none of its actions registered: {BROKEN}" in caplog.messages

    await sim.env.advance_time(TICK)
    result = await sim.mod.slash(sim.staff, "event health")
    (embed,) = result.response.embeds
    assert embed.title == "❌ Health: 1 problem"
    assert embed.description == f"❌ {BROKEN}"

    # Started all the same: its built-in actions run.
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert len(sim.announcements.history(viewer=sim.player)) == 1


async def test_a_plugins_action_runs_in_a_live_event(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_example(monkeypatch, tmp_path)
    with sim.env.time_context():
        await sim.start_bot()
        await sim.publish(yaml.safe_load((EXAMPLE_PLUGIN / "dice-night.yaml").read_text(encoding="utf-8")))
    await sim.mod.slash(sim.staff, "event start", definition="dice-night")
    seen = [m.content for m in sim.announcements.history(viewer=sim.player)]
    assert seen[0] == "Dice night begins. Who wins the treasure?"
    assert seen[1].startswith("🎲 Roll for the treasure: 2d6 → ")
    run = await sim.only_run()
    assert run.status == "completed"
