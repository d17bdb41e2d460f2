"""Retention seen from Discord: the bot's own housekeeping prunes an old run's steps and history
(``retention`` in the config), and ``/event status`` still says who started it, how it ended
and when, and that its steps were pruned."""

from __future__ import annotations

import sqlalchemy as sa

from runner.schema import run_log, steps
from tests.bot.conftest import Sim
from wiring.config import Config


async def test_status_of_a_run_the_bot_pruned_still_names_who_started_it_and_when_it_ended(sim: Sim) -> None:
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(61)
    assert (await sim.run(1)).status == "completed"
    # A period of a minute (0.0007 days), so the bot's housekeeping prunes it within the test.
    config = Config.model_validate({**sim.config.model_dump(), "retention": {"keep_run_log_days": 0.0007}})
    await sim.start_bot(config)
    assert sim.bot.services.runner.settings.keep_run_log_seconds == config.retention.keep_seconds
    await sim.env.advance_time(120)

    async with sim.engine.connect() as conn:
        left = (await conn.execute(sa.select(sa.func.count()).where(steps.c.run_id == 1))).scalar()
        lines = (await conn.execute(sa.select(sa.func.count()).where(run_log.c.run_id == 1))).scalar()
    assert left <= 1 and lines <= 1, "pruned, but for the newest step and line of their tables"
    status = (await sim.mod.slash(sim.staff, "event status", run=1)).response.embeds[0]
    assert status.description is not None
    assert "Status: **completed**" in status.description
    assert f"by {sim.mod.mention}" in status.description, "who started it, as a mention"
    assert "Ended <t:" in status.description
    assert (
        "Its steps and run log were pruned after the retention period: 4 steps (4 done)" in status.description
    )
    assert not status.fields, "no phase shows its steps as 'not reached'"
