"""Races: three runner processes tick one MariaDB database over 1,000 runs.

The promise: no step is dispatched twice except after a genuine lease expiry, and the test proves
which. Every dispatch journals the lease it holds, read from the step row the moment the action
starts (``tests/reliability/child_runner.py``). For any step dispatched twice,
``harness.prove_redispatches`` shows from those leases that the second claim was made after the
first lease had run out and with ``attempts`` counted up, and names what left the first lease to
run out (its dispatch overran, or it ended in time but its settle never reached the database).

Leases here are comfortably longer than any action (20 s run lease, 2 s budget + 10 s margin for
a step that sleeps at most 6 ms), so the expected number of double dispatches is zero, and the
test asserts that too. The first assertion is the contract; the second is what these leases
promise on top of it.

Three processes, not three engines in one process: separate pools, separate event loops,
separate clocks read on separate cores, and the claim statements racing for real on InnoDB row
locks under READ COMMITTED. A wait ends phase one, so every run is given back and taken again by
whichever runner gets there first; the test checks that runs did change hands. Database errors the
runners logged are counted and, when InnoDB reported a deadlock, its own account of the latest
one is printed for whoever reads the log.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from runner.schema import run_log
from tests.reliability.child_runner import ANNOUNCE, WAIT
from tests.reliability.harness import (
    Child,
    Verdict,
    all_steps,
    judge_completion,
    judge_deliveries,
    judge_leases,
    publish_and_start,
    read_journals,
    run_statuses,
)
from tests.support.definitions import event, phase, step

RUNNERS = 3
DEFINITIONS = 10
SCOPES = 100  # 10 x 100 = 1,000 runs
STEPS_PER_RUN = 3
# The wait ends phase one, so phase two starts held: the run is given back and taken again by
# whichever runner gets there first. Long enough that no runner's own tick outlasts it.
HOLD = 1.0
CHILD: dict[str, Any] = {
    "lease_seconds": 20,
    "margin_seconds": 10,
    "budget_ms": 2000,
    "max_sleep": 0.006,
    "retry_seconds": 1.0,
    "interval": 0.2,
    "concurrent_runs": 32,
}
STEP_LEASE = dt.timedelta(seconds=CHILD["budget_ms"] / 1000 + CHILD["margin_seconds"])
FINISH_WITHIN = 300.0


async def latest_deadlock(engine: AsyncEngine) -> str:
    """InnoDB's own account of the last deadlock, for the report (needs PROCESS; ours has ALL)."""
    async with engine.connect() as conn:
        status = (await conn.exec_driver_sql("SHOW ENGINE INNODB STATUS")).all()[0][2]
    start = status.find("LATEST DETECTED DEADLOCK")
    if start < 0:
        return "(none recorded)"
    end = status.find("------------\nTRANSACTIONS", start)
    return status[start:end][:6000]


async def steps_retried_after_their_budget(engine: AsyncEngine) -> set[int]:
    """Steps the runner retried because their action overran its budget, by the run log."""
    async with engine.connect() as conn:
        query = sa.select(run_log.c.step_id, run_log.c.detail).where(run_log.c.kind == "step.retry")
        rows = (await conn.execute(query)).all()
    return {int(r.step_id) for r in rows if "budget" in str((r.detail or {}).get("error", ""))}


def race_spec(n: int) -> dict[str, Any]:
    return event(
        f"race-{n}",
        phase(
            "one",
            step(ANNOUNCE, {"text": "go"}, on_failure=None),
            step(WAIT, {"seconds": HOLD}, on_failure=None),
        ),
        phase("two", step(ANNOUNCE, {"text": "done"}, on_failure=None)),
        title=f"Race {n}",
        scopes=[f"d{n}s{i}" for i in range(SCOPES)],
    )


@pytest.mark.slow
@pytest.mark.mariadb
async def test_three_runner_processes_dispatch_each_step_once_or_prove_the_lease_ran_out(
    mariadb_url: str, tmp_path: Path
) -> None:
    engine = create_engine(mariadb_url)
    controls = Controls(engine, clock=SystemClock())
    children: list[Child] = []
    try:
        for n in range(DEFINITIONS):
            await publish_and_start(engine, controls, race_spec(n))
        assert len(await run_statuses(engine)) == DEFINITIONS * SCOPES

        started = time.monotonic()
        children = [
            await Child.start(mariadb_url, f"race-{i}", tmp_path, seed=i, **CHILD) for i in range(RUNNERS)
        ]
        await asyncio.gather(*(c.ready() for c in children))
        deadline = time.monotonic() + FINISH_WITHIN
        while True:
            statuses = await run_statuses(engine)
            if all(s == "completed" for s in statuses.values()):
                break
            dead = [c.owner for c in children if not c.alive()]
            if dead or time.monotonic() > deadline:
                pytest.fail(
                    f"runs left {dict(Counter(s for s in statuses.values() if s != 'completed'))}, "
                    f"dead runners {dead}:\n" + "\n".join(c.stderr_tail() for c in children)
                )
            await asyncio.sleep(0.25)
        elapsed = time.monotonic() - started
        codes = [await c.stop() for c in children]
        rows = await all_steps(engine)
        deadlock = await latest_deadlock(engine)
        budget_retries = await steps_retried_after_their_budget(engine)
    finally:
        for child in children:
            await child.kill()
        await engine.dispose()

    journals = read_journals(c.journal for c in children)
    verdict = Verdict()
    verdict.check(codes == [0] * RUNNERS, f"runner exit codes {codes}")
    judge_completion(statuses, rows, STEPS_PER_RUN, verdict)
    # The contract: a step goes out twice only after a genuine lease expiry.
    redispatches = judge_leases(journals, STEP_LEASE, set(), verdict)
    # What these leases promise on top: with leases far longer than any action, never, except
    # for a dispatch its action's budget cut off (a 6 ms action on a machine so loaded that its
    # event loop starved for 2 s): that is an ordinary transient retry, and the run log says so.
    cut_off = {r.step_id for r in redispatches} & budget_retries
    unexplained = [r for r in redispatches if r.step_id not in cut_off]
    verdict.check(
        not unexplained,
        f"{len(unexplained)} double dispatches with leases far longer than any action:\n"
        + "\n".join(r.describe() for r in unexplained[:20]),
    )
    dispatched = Counter(d.step_id for d in journals.dispatches)
    verdict.check(
        sorted(dispatched) == sorted(int(r["id"]) for r in rows),
        f"{len(dispatched)} steps dispatched of {len(rows)}",
    )
    judge_deliveries(journals, rows, verdict)

    # The race was real: every process dispatched, and runs changed hands between processes.
    by_owner = Counter(d.owner for d in journals.dispatches)
    owners_per_run: dict[int, set[str]] = defaultdict(set)
    for d in journals.dispatches:
        owners_per_run[d.run_id].add(d.owner)
    verdict.check(len(by_owner) == RUNNERS, f"not every runner dispatched: {dict(by_owner)}")
    changed_hands = sum(1 for o in owners_per_run.values() if len(o) > 1)
    verdict.check(changed_hands > 0, "no run ever changed hands: the runners never raced for a run in flight")
    logs = "\n".join(c.stderr.read_text(errors="replace") for c in children)
    verdict.stats.update(
        {
            "seconds": round(elapsed, 1),
            "dispatches": len(journals.dispatches),
            "dispatches per runner": dict(by_owner),
            "runs advanced by more than one runner": changed_hands,
            "double dispatches": len(redispatches),
            "of which retries after a budget cut-off": len(cut_off),
            "loop outage lines": len(re.findall(r"database unreachable", logs)),
            "per-run database errors": len(re.findall(r"database error while advancing", logs)),
            "deadlocks logged": len(re.findall(r"Deadlock found", logs)),
            "other errors logged": len(re.findall(r" ERROR ", logs)),
            "runner log lines by kind": dict(
                Counter(
                    re.sub(r"\d+", "N", line.split(": ", 1)[-1])[:110]
                    for line in logs.splitlines()
                    if " runner." in line
                ).most_common(6)
            ),
        }
    )
    print(f"\nraces[mariadb]: {verdict.stats}")
    if verdict.stats["deadlocks logged"]:
        print(f"InnoDB's latest detected deadlock:\n{deadlock}")
    assert not verdict.problems, "\n".join(verdict.problems[:40])
