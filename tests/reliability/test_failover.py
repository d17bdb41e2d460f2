"""Failover: SIGKILL one of two runner processes in the middle of an event, while it is sending a
step; the other carries every run the dead one held on within 20 s of the kill (the leases bound
it at 13 s for the step being sent, 14 s at most), with no step lost or dispatched twice (``tests/reliability/failover.py`` runs and
judges the round; ``bench/failover.py`` times ten alone and ten with every core busy).

The leases are the bot's own serving defaults (``bench.failover.SENDING``: a 5 s run lease, a
step lease of the Discord actions' 10 s budget + 3 s, the loop's interval 5 s; an announcement
takes up to 1 s, as a Discord send may), so the bound is the one a real deployment gets; before
issue 13 a run could wait up to 95 s for its dead holder, and before issue 26 item 6, 21.6 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.failover import SENDING
from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from tests.reliability.failover import GOAL_SECONDS, cores_kept_busy, one_round, start_child

# Two runner processes and a SIGKILL, judged by a 20 s wall-clock bound, once alone on the cores
# (scripts/test.py --all runs realtime tests in a pass of their own) and once with every core spinning.
pytestmark = [pytest.mark.slow, pytest.mark.realtime]


@pytest.mark.parametrize("loaded", [False, True], ids=["alone", "cores-kept-busy"])
async def test_the_survivor_carries_every_run_the_killed_runner_held_on_within_20_s_exactly_once(
    mariadb_url: str, tmp_path: Path, loaded: bool
) -> None:
    engine = create_engine(mariadb_url)
    first = await start_child(mariadb_url, "runner-a", tmp_path, SENDING)
    second = await start_child(mariadb_url, "runner-b", tmp_path, SENDING)
    try:
        with cores_kept_busy(loaded):
            controls = Controls(engine, clock=SystemClock())
            done = await one_round(engine, controls, first, second, SENDING, mid_send=True)
    finally:
        for child in (first, second):
            await child.kill()
        await engine.dispose()
    assert done.verdict.problems == [], done.verdict.problems
    assert done.held and done.killed in ("runner-a", "runner-b"), "the kill landed while it held runs"
    assert done.mid_send, "the kill landed while a step was being sent"
    assert done.takeover_seconds <= GOAL_SECONDS, (
        f"runs held by the killed runner waited {done.per_run} s for the survivor"
    )
    # 2 s for the survivor's tick under load (the target of issue 26 item 6 is 15 s; measured at
    # most 14.0 s over twenty kills, alone and with every core busy: bench/RESULTS.md).
    assert done.takeover_seconds <= SENDING.worst_case_seconds() + 2, "the leases bound the wait"
