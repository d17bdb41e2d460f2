"""Crash: a runner process is SIGKILLed at random moments, again and again, and a fresh runner
finishes every run.

The promise (issue 4, seeds §E): no step is lost; every delivery of one step carries that step's
idempotency key; a platform that dedups by key (Discord's ``enforce_nonce``) shows no announcement
twice. A second dispatch of a step is allowed, after a crash, only once the dead runner's lease
has run out: that is what the key is for.

One database per backend, one stream of trials: the parent keeps about a dozen runs in flight
(new waves are published and started as runs complete), starts a child runner, waits for it to
be ready, lets it work for a random 0.05-1.5 s and SIGKILLs it. The kills land in an action's
sleep before or after its delivery, in a transaction, between ticks, in the reclaim: wherever the
process happens to be. The next child is the fresh runner that must pick the pieces up. After
the last kill a finisher child runs until every run has completed, while the parent plays the
game master confirming every parked cue.

Leases are short (run 0.5 s, step = 1 s budget + 0.5 s margin) so a trial takes about a second.
``max_attempts`` is raised in the children: with fifty kills one step can be interrupted three
times, and the give-up that would then fail it on purpose is a policy with its own tests
(``tests/runner``), not a lost step. Every dispatch's ``attempts`` is still checked to grow.

What the defect this guards against would look like: a reclaim that resets ``attempts`` or a
materialise that draws a new idempotency key on a second pass (a re-dispatch with another key is
a duplicate announcement); a parked cue reclaimed as stale (a cue posted twice); a run left
``starting`` or ``ending`` by a kill that nothing ever picks up again (a stuck run).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from tests.reliability.child_runner import ANNOUNCE, CUE, WAIT
from tests.reliability.harness import (
    Child,
    Verdict,
    all_steps,
    confirm_parked,
    judge_completion,
    judge_deliveries,
    judge_leases,
    publish_and_start,
    read_journals,
    run_statuses,
)
from tests.support.definitions import event, phase, step

IN_FLIGHT = 12
WAVE_SCOPES = 6
CHILD: dict[str, Any] = {
    "lease_seconds": 0.5,
    "margin_seconds": 0.5,
    "budget_ms": 1000,
    "max_sleep": 0.12,
    "retry_seconds": 0.5,
    "max_attempts": 1000,
    "interval": 0.2,
}
STEP_LEASE = dt.timedelta(seconds=CHILD["budget_ms"] / 1000 + CHILD["margin_seconds"])
FINISH_WITHIN = 120.0
# From this many kills on, at least one lands mid-dispatch and one between a delivery and its
# settle (every run so far: a third of the kills, and a dozen or more redeliveries per 50).
COVERAGE_TRIALS = 10


def announce(text: str) -> dict[str, Any]:
    return step(ANNOUNCE, {"text": text}, on_failure=None)


def wait(seconds: float) -> dict[str, Any]:
    return step(WAIT, {"seconds": seconds}, on_failure=None)


def wave_spec(wave: int) -> dict[str, Any]:
    """Ten steps over three phases: announcements, a parked cue, a wait inside a phase and one at
    the end of a phase (which holds the next phase's first step)."""
    return event(
        f"crash-{wave}",
        phase(
            "opening",
            announce("doors open"),
            announce("rules"),
            step(CUE, {"text": "spawn the boss"}, on_failure=None),
            announce("the boss is here"),
        ),
        phase("middle", wait(0.3), announce("half time"), announce("second half"), wait(0.2)),
        phase("closing", announce("winners"), announce("thanks")),
        title=f"Crash wave {wave}",
        scopes=[f"w{wave}s{i}" for i in range(WAVE_SCOPES)],
    )


STEPS_PER_RUN = 10
DELIVERING_PER_RUN = 8


@pytest.mark.slow
async def test_sigkilled_runners_lose_no_step_and_deliver_each_once_by_key(
    backend: str, database_url: str, tmp_path: Path, crash_trials: int
) -> None:
    seed = int(os.environ.get("EVENTBOT_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    engine = create_engine(database_url)
    controls = Controls(engine, clock=SystemClock())
    children: list[Child] = []
    waves = 0
    started = time.monotonic()
    died_on_their_own: list[str] = []

    async def top_up() -> None:
        nonlocal waves
        statuses = await run_statuses(engine)
        if sum(1 for s in statuses.values() if s != "completed") < IN_FLIGHT:
            waves += 1
            await publish_and_start(engine, controls, wave_spec(waves))

    try:
        for trial in range(crash_trials):
            await top_up()
            child = await Child.start(
                database_url, f"crash-{backend}-{trial}", tmp_path, seed=seed + trial, **CHILD
            )
            children.append(child)
            await child.ready()
            until = time.monotonic() + rng.uniform(0.05, 1.5)
            while time.monotonic() < until:
                await confirm_parked(engine, controls)
                await asyncio.sleep(0.05)
            if not child.alive():
                died_on_their_own.append(f"{child.owner}:\n{child.stderr_tail()}")
            await child.kill()

        kills_done = time.monotonic()
        finisher = await Child.start(database_url, f"finisher-{backend}", tmp_path, seed=seed, **CHILD)
        children.append(finisher)
        await finisher.ready()
        deadline = time.monotonic() + FINISH_WITHIN
        while True:
            await confirm_parked(engine, controls)
            statuses = await run_statuses(engine)
            if all(s == "completed" for s in statuses.values()):
                break
            if time.monotonic() > deadline or not finisher.alive():
                stuck = Counter(s for s in statuses.values() if s != "completed")
                pytest.fail(
                    f"seed {seed}: the fresh runner did not finish every run within {FINISH_WITHIN:.0f} s "
                    f"(still {dict(stuck)}); finisher stderr:\n{finisher.stderr_tail()}"
                )
            await asyncio.sleep(0.1)
        finished = time.monotonic()
        assert await finisher.stop() == 0, finisher.stderr_tail()
        rows = await all_steps(engine)
        statuses = await run_statuses(engine)
    finally:
        for child in children:
            await child.kill()
        await engine.dispose()

    killed = {c.owner for c in children if c.killed}
    journals = read_journals(c.journal for c in children)
    verdict = Verdict()
    verdict.check(not died_on_their_own, f"runner processes died before the kill: {died_on_their_own}")

    judge_completion(statuses, rows, STEPS_PER_RUN, verdict)
    # Attempts are counted up on every dispatch, never reset.
    redispatches = judge_leases(journals, STEP_LEASE, killed, verdict)
    dispatched = Counter(d.step_id for d in journals.dispatches)
    for row in rows:
        verdict.check(
            int(row["attempts"]) >= dispatched[int(row["id"])],
            f"step {row['id']} has attempts={row['attempts']} after {dispatched[int(row['id'])]} dispatches",
        )

    # Same key on every delivery of a step; a key-deduping channel shows each step once.
    judge_deliveries(journals, rows, verdict)

    # The trials did what they claim: kills landed mid-dispatch, and some of them left a message
    # delivered but its step unsettled (the case the key exists for).
    cut_short = {d.owner for d in journals.dispatches if d.ended_at is None and d.owner in killed}
    verdict.stats.update(
        {
            "seed": seed,
            "trials": crash_trials,
            "runs": len(statuses),
            "steps": len(rows),
            "dispatches": len(journals.dispatches),
            "kills that cut a dispatch short": len(cut_short),
            "redispatches": dict(Counter(r.cause for r in redispatches)),
            "kill phase (s)": round(kills_done - started, 1),
            "finish after last kill (s)": round(finished - kills_done, 1),
        }
    )
    if crash_trials >= COVERAGE_TRIALS:
        verdict.check(len(cut_short) >= 1, "no kill landed during a dispatch: the trials tested nothing")
        verdict.check(
            verdict.stats["steps delivered more than once"] >= 1,
            "no step was ever delivered twice: no kill landed between a delivery and its settle",
        )
    print(f"\ncrash[{backend}]: {verdict.stats}")
    assert not verdict.problems, f"seed {seed}:\n" + "\n".join(verdict.problems[:40])
