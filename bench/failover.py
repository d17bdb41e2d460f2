"""Failover: two runner processes on one MariaDB; one is SIGKILLed in the middle of an event, ten
times alone on the cores and ten times with every core kept busy, and the other must carry every
run the dead one held on within 15 s of the kill (the target of issue 26 item 6; 20 s is promised),
with no step lost or dispatched twice (``tests/reliability/failover.py`` runs and judges each
round).

Each round starts ``RUNS`` runs of a 9-step event (announce, 1 s wait, ...) while both processes
serve them as the bot does (waits slept through in process, the loop's interval 5 s), kills the
victim once it holds a run, and times, for every run it held, the kill -> the survivor's first
dispatch of one of its steps; a round's figure is its slowest run. A new victim is started for
the next round. Each row shows the min, median and max of its rounds against the 15 s target;
every round's exactly-once verdict is in the details, and a round that lost or doubled a step
fails the row whatever the times. In the loaded series one spinning process per core runs for
the whole of each round (``failover.cores_kept_busy``, as the test's loaded case).

The leases measured are the serving defaults (``SERVING``: what the bot runs with, from
``runner.engine.serving_settings`` and the Discord actions' budget): a 5 s run lease, a step lease
of the 10 s budget + 3 s. ``BEFORE`` are the defaults before issue 13 (a 60 s run lease, 15 s +
15 s), under which a run could wait up to 95 s; ``--quick`` runs 3 rounds a series.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

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
from tests.reliability.failover import GOAL_SECONDS, Leases, cores_kept_busy, one_round, start_child

KILLS = 10
# Issue 26 item 6: every run the dead process held moves within this of the kill at the bot's
# default tick, so the 20 s promise (``GOAL_SECONDS``) keeps a margin.
TARGET_SECONDS = 15.0
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
# The same, each announcement taking up to 1 s as a Discord send may, so that the kill can be
# landed while a step is being sent (``one_round(mid_send=True)``): that run waits for the step's
# lease, the longest path; the victim's other runs sit in waits held in process.
SENDING = dataclasses.replace(SERVING, send_seconds=1.0)


@dataclass
class Series:
    """The rounds of one series: each round's takeover (its slowest run) and what it said."""

    times: list[float] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    failed: int = 0
    # Per run, over the rounds: those whose step the victim was sending, and the rest.
    sending: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)

    def summary(self) -> str:
        return f"min {min(self.times):.2f} s, median {median(self.times):.2f} s, max {max(self.times):.2f} s"

    def split(self) -> str:
        def spread(values: list[float]) -> str:
            if not values:
                return "none"
            return f"{len(values)} runs, {min(values):.2f}-{max(values):.2f} s (median {median(values):.2f})"

        return f"per run, killed mid-send: {spread(self.sending)}; at a wait: {spread(self.waiting)}"


async def _series(
    url: str, engine: AsyncEngine, controls: Controls, workdir: Path, kills: int, *, loaded: bool
) -> Series:
    """``kills`` rounds with the serving leases, every core spinning during each if ``loaded``."""
    series = Series()
    name = "busy" if loaded else "alone"
    pair = [
        await start_child(url, f"{name}-0", workdir, SENDING),
        await start_child(url, f"{name}-1", workdir, SENDING),
    ]
    started = 2
    try:
        for kill in range(kills):
            with cores_kept_busy(loaded):
                done = await one_round(engine, controls, pair[0], pair[1], SENDING, mid_send=True)
            series.times.append(done.takeover_seconds)
            sent = [done.per_run[r] for r in done.mid_send]
            waited = [t for r, t in done.per_run.items() if r not in done.mid_send]
            series.sending.extend(sent)
            series.waiting.extend(waited)
            if done.verdict.problems:
                series.failed += 1
            series.details.append(
                f"{name}, kill {kill + 1}: {len(done.held)} runs held, takeover {done.takeover_seconds:.2f} s "
                f"(killed mid-send: {', '.join(f'{t:.2f}' for t in sorted(sent)) or 'none'}; "
                f"at a wait: {', '.join(f'{t:.2f}' for t in sorted(waited)) or 'none'}); "
                + (
                    "exactly once: yes"
                    if not done.verdict.problems
                    else f"PROBLEMS: {done.verdict.problems[:3]}"
                )
            )
            # The killed process is replaced: two runners again for the next kill.
            index = 0 if pair[0].owner == done.killed else 1
            pair[index] = await start_child(url, f"{name}-{started}", workdir, SERVING)
            started += 1
    finally:
        for child in pair:
            await child.kill()
    return series


def _row(kills: int, series: Series, *, loaded: bool) -> Result:
    worst = max(series.times)
    where = "every core kept busy" if loaded else "alone on the cores"
    return Result(
        f"failover takeover, serving defaults, {where} ({kills} SIGKILLs)",
        "mariadb",
        series.summary(),
        f"{TARGET_SECONDS:.0f} s target ({GOAL_SECONDS:.0f} s promised)",
        worst / TARGET_SECONDS,
        f"max <= {TARGET_SECONDS:.0f} s, no step lost or doubled",
        worst <= TARGET_SECONDS and series.failed == 0,
        [series.split(), *series.details],
    )


async def run(backend: Backend, options: Options) -> list[Result]:
    if backend.name != "mariadb":
        return []
    kills = 3 if options.quick else KILLS
    url = await backend.create()
    engine = create_engine(url)
    try:
        controls = Controls(engine, clock=SystemClock())
        with tempfile.TemporaryDirectory(prefix="eventbot-failover-") as tmp:
            workdir = Path(tmp)
            alone = await _series(url, engine, controls, workdir, kills, loaded=False)
            busy = await _series(url, engine, controls, workdir, kills, loaded=True)
            # One kill with the leases before issue 13, for the record of what the serving defaults bought.
            pair = [
                await start_child(url, "defaults-0", workdir, BEFORE),
                await start_child(url, "defaults-1", workdir, BEFORE),
            ]
            try:
                defaults = await one_round(engine, controls, pair[0], pair[1], BEFORE, finish_within=300)
            finally:
                for child in pair:
                    await child.kill()
    finally:
        await engine.dispose()
        await backend.drop(url)
    alone.details.insert(
        0,
        f"leases: run {SERVING.run_lease_seconds:g} s, step = {SERVING.budget_ms / 1000:g} s budget + "
        f"{SERVING.margin_seconds:g} s, the loop's interval {SERVING.interval:g} s; an announcement "
        f"takes up to {SENDING.send_seconds:g} s and each kill lands while a step is being sent "
        f"(worst case by construction {SERVING.worst_case_seconds():g} s; the defaults' "
        f"{BEFORE.worst_case_seconds():g} s before issue 13)",
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
        _row(kills, alone, loaded=False),
        _row(kills, busy, loaded=True),
    ]
