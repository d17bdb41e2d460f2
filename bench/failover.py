"""Failover: two runner processes on one MariaDB; one is SIGKILLed in the middle of an event, ten
times, and the other must carry every run the dead one held on within 20 s of the kill, with no
step lost or dispatched twice (``tests/reliability/failover.py`` runs and judges each round).

Each round starts ``RUNS`` runs of a 9-step event (announce, 1 s wait, ...) while both processes
serve them as the bot does (waits slept through in process, housekeeping once per interval),
kills the victim once it holds a run, and times, for every run it held, the kill -> the
survivor's first dispatch of one of its steps; a round's figure is its slowest run. A new
victim is started for the next round. The table shows the median and the worst of the rounds
against the 20 s goal; every round's exactly-once verdict is in the details, and a round that
lost or doubled a step fails the row whatever the times.

The leases measured are the serving defaults (``SERVING``: what the bot runs with, from
``runner.engine.serving_settings`` and the Discord actions' budget): a 5 s run lease, a step lease
of the 10 s budget + 3 s, housekeeping every 5 s. ``BEFORE`` are the defaults before issue 13 (a
60 s run lease, 15 s + 15 s), under which a run could wait up to 95 s; ``--quick`` runs 3 rounds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from actions.messaging import DISCORD_BUDGET_MS
from bench.backends import Backend
from bench.results import Options, Result, median
from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from runner.engine.core import (
    SERVING_RUN_LEASE_AFTER_STEP_SECONDS,
    SERVING_RUN_LEASE_SECONDS,
    SERVING_STEP_LEASE_MARGIN_SECONDS,
)
from tests.reliability.failover import GOAL_SECONDS, Leases, one_round, start_child

KILLS = 10
BEFORE = Leases(run_lease_seconds=60, margin_seconds=15, budget_ms=15_000, housekeeping_seconds=5)
SERVING = Leases(
    run_lease_seconds=SERVING_RUN_LEASE_SECONDS,
    margin_seconds=SERVING_STEP_LEASE_MARGIN_SECONDS,
    budget_ms=DISCORD_BUDGET_MS,
    # The bot's housekeeping runs once per tick interval, 5 s by default, and so does its loop.
    housekeeping_seconds=5,
    interval=5.0,
    after_step_seconds=SERVING_RUN_LEASE_AFTER_STEP_SECONDS,
)


async def run(backend: Backend, options: Options) -> list[Result]:
    if backend.name != "mariadb":
        return []
    kills = 3 if options.quick else KILLS
    leases = SERVING
    url = await backend.create()
    engine = create_engine(url)
    times: list[float] = []
    details: list[str] = []
    failed = 0
    try:
        controls = Controls(engine, clock=SystemClock())
        with tempfile.TemporaryDirectory(prefix="eventbot-failover-") as tmp:
            workdir = Path(tmp)
            pair = [
                await start_child(url, "runner-0", workdir, leases),
                await start_child(url, "runner-1", workdir, leases),
            ]
            started = 2
            try:
                for kill in range(kills):
                    done = await one_round(engine, controls, pair[0], pair[1], leases)
                    times.append(done.takeover_seconds)
                    if done.verdict.problems:
                        failed += 1
                    details.append(
                        f"kill {kill + 1}: {len(done.held)} runs held, takeover {done.takeover_seconds:.2f} s "
                        f"(per run: {', '.join(f'{s:.2f}' for s in sorted(done.per_run.values()))}); "
                        + (
                            "exactly once: yes"
                            if not done.verdict.problems
                            else f"PROBLEMS: {done.verdict.problems[:3]}"
                        )
                    )
                    # The killed process is replaced: two runners again for the next kill.
                    index = 0 if pair[0].owner == done.killed else 1
                    pair[index] = await start_child(url, f"runner-{started}", workdir, leases)
                    started += 1
                # One kill with the leases before issue 13, for the record of what the serving defaults bought.
                for child in pair:
                    await child.stop()
                pair = [
                    await start_child(url, "defaults-0", workdir, BEFORE),
                    await start_child(url, "defaults-1", workdir, BEFORE),
                ]
                defaults = await one_round(engine, controls, pair[0], pair[1], BEFORE, finish_within=300)
            finally:
                for child in pair:
                    await child.kill()
    finally:
        await engine.dispose()
        await backend.drop(url)
    worst = max(times)
    details.insert(
        0,
        f"leases: run {leases.run_lease_seconds:g} s, step = {leases.budget_ms / 1000:g} s budget + "
        f"{leases.margin_seconds:g} s, housekeeping every {leases.housekeeping_seconds:g} s "
        f"(worst case by construction {leases.worst_case_seconds():g} s; the defaults' "
        f"{BEFORE.worst_case_seconds():g} s before)",
    )
    return [
        Result(
            "failover takeover, the leases before issue 13 (1 SIGKILL)",
            backend.name,
            f"{defaults.takeover_seconds:.2f} s",
            f"{GOAL_SECONDS:.0f} s goal",
            defaults.takeover_seconds / GOAL_SECONDS,
            "for the record (it was > 20 s)",
            not defaults.verdict.problems,
            [
                f"run lease {BEFORE.run_lease_seconds:g} s, step = {BEFORE.budget_ms / 1000:g} s budget + "
                f"{BEFORE.margin_seconds:g} s, housekeeping every {BEFORE.housekeeping_seconds:g} s; "
                f"{len(defaults.held)} runs held, per run: "
                + ", ".join(f"{v:.2f}" for v in sorted(defaults.per_run.values()))
                + (
                    "; exactly once: yes"
                    if not defaults.verdict.problems
                    else f"; PROBLEMS: {defaults.verdict.problems[:3]}"
                )
            ],
        ),
        Result(
            f"failover takeover, serving defaults ({kills} SIGKILLs)",
            backend.name,
            f"median {median(times):.2f} s, worst {worst:.2f} s",
            f"{GOAL_SECONDS:.0f} s goal",
            worst / GOAL_SECONDS,
            "worst <= 20 s, no step lost or doubled",
            worst <= GOAL_SECONDS and failed == 0,
            details,
        ),
    ]
