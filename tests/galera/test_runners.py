"""Three runner processes, one connected to each node of a Galera cluster.

* Over 1,000 runs of one step each (``EVENTBOT_GALERA_RUNS`` and ``EVENTBOT_GALERA_STEPS`` set
  how many; about 60 s here; ``python -m bench --only galera`` runs 1,000 runs of two steps):
  every step dispatched exactly once.
  Each node certifies the others' writes only at COMMIT, so the claims race for real and some
  lose at COMMIT; the conflicts each runner retried are counted and printed, as are the nodes'
  own counters (``wsrep_local_cert_failures``, ``wsrep_local_bf_aborts``).
* A node SIGKILLed mid-run and restarted (it rejoins by IST or SST): every run finishes, and a
  step that went out twice did so only after its lease genuinely ran out (its runner's node was
  gone), with the same idempotency key, so a nonce-deduping channel shows it once.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.galera.conftest import GaleraDatabase
from tests.galera.fleet import CHILD, publish_runs, run_fleet
from tests.reliability.harness import Child, Verdict, judge_completion, judge_deliveries, judge_leases
from tests.support.galera_cluster import GaleraCluster

RUNS = int(os.environ.get("EVENTBOT_GALERA_RUNS", "1000"))
STEPS_PER_RUN = int(os.environ.get("EVENTBOT_GALERA_STEPS", "1"))
STEP_LEASE = dt.timedelta(seconds=CHILD["budget_ms"] / 1000 + CHILD["margin_seconds"])


async def test_three_runner_processes_one_per_node_dispatch_every_step_exactly_once(
    galera_cluster: GaleraCluster, galera_database: GaleraDatabase, tmp_path: Path
) -> None:
    await publish_runs(galera_database.urls[0], RUNS, STEPS_PER_RUN)
    fleet = await run_fleet(galera_cluster, galera_database.urls, tmp_path, options=CHILD, finish_within=240)

    verdict = Verdict()
    verdict.check(fleet.codes == [0, 0, 0], f"runner exit codes {fleet.codes}")
    judge_completion(fleet.statuses, fleet.rows, STEPS_PER_RUN, verdict)
    verdict.check(len(fleet.statuses) == RUNS, f"{len(fleet.statuses)} runs, {RUNS} published")
    redispatches = judge_leases(fleet.journals, STEP_LEASE, set(), verdict)
    # Leases far longer than any action, and no process killed: a step goes out once, never twice.
    verdict.check(not redispatches, "\n".join(r.describe() for r in redispatches[:20]))
    dispatched = Counter(d.step_id for d in fleet.journals.dispatches)
    verdict.check(
        sorted(dispatched) == sorted(int(r["id"]) for r in fleet.rows) and set(dispatched.values()) == {1},
        f"dispatches per step: {Counter(dispatched.values())} over {len(fleet.rows)} steps",
    )
    judge_deliveries(fleet.journals, fleet.rows, verdict)
    by_owner = Counter(d.owner for d in fleet.journals.dispatches)
    verdict.check(len(by_owner) == 3, f"not every node's runner dispatched: {dict(by_owner)}")
    verdict.check(fleet.conflicts_gave_up() == 0, f"conflicts that ran out of retries: {fleet.retried}")
    # The claims raced for real: some lost at COMMIT to another node and were retried (100-130
    # of them per 1,000 runs here).
    verdict.check(fleet.conflicts_retried() > 0, f"no conflict was ever retried: {fleet.node_conflicts}")
    verdict.stats.update(fleet.summary())
    print(f"\ngalera three runners: {verdict.stats}")
    assert not verdict.problems, "\n".join(verdict.problems[:40])


KILL_RUNS = int(os.environ.get("EVENTBOT_GALERA_KILL_RUNS", "300"))
# Short leases, so the runs the cut-off runner held are taken over within seconds; a budget that
# a dispatch on a loaded machine with a node rejoining still meets, and attempts to spare.
KILL_CHILD: dict[str, Any] = {
    **CHILD,
    "lease_seconds": 3,
    "margin_seconds": 2,
    "budget_ms": 3000,
    "max_attempts": 5,
}
KILL_STEP_LEASE = dt.timedelta(seconds=KILL_CHILD["budget_ms"] / 1000 + KILL_CHILD["margin_seconds"])
KILLED_NODE = 1


async def test_a_node_killed_mid_run_and_restarted_every_run_finishes_exactly_once(
    galera_cluster: GaleraCluster, galera_database: GaleraDatabase, tmp_path: Path
) -> None:
    await publish_runs(galera_database.urls[0], KILL_RUNS, STEPS_PER_RUN)
    struck: dict[str, Any] = {}

    async def strike(children: list[Child], done: float) -> None:
        if "killed_at" not in struck and done >= 0.2:
            galera_cluster.kill_hard(KILLED_NODE)
            struck["killed_at"] = time.monotonic()
            struck["done_when_killed"] = round(done, 2)
        elif (
            "killed_at" in struck
            and "rejoined_in" not in struck
            and time.monotonic() - struck["killed_at"] > 3
        ):
            struck["rejoined_in"] = round(galera_cluster.restart(KILLED_NODE), 1)

    try:
        fleet = await run_fleet(
            galera_cluster,
            galera_database.urls,
            tmp_path,
            options=KILL_CHILD,
            finish_within=240,
            during=strike,
            watch_url=galera_database.urls[0],
        )
    finally:
        # Whatever happened, the session's cluster is whole again for the tests after this one.
        if "rejoined_in" not in struck and "killed_at" in struck:
            struck["rejoined_in"] = round(galera_cluster.restart(KILLED_NODE), 1)

    verdict = Verdict()
    verdict.check("killed_at" in struck, "the runs ended before the node could be killed")
    verdict.check(fleet.codes == [0, 0, 0], f"runner exit codes {fleet.codes}")
    judge_completion(fleet.statuses, fleet.rows, STEPS_PER_RUN, verdict)
    # The runner on the killed node was cut off, not killed: a step it held could only go out
    # again after its lease ran out, and then with the same key.
    redispatches = judge_leases(fleet.journals, KILL_STEP_LEASE, set(), verdict)
    judge_deliveries(fleet.journals, fleet.rows, verdict)
    verdict.stats.update(fleet.summary())
    verdict.stats.update(struck)
    verdict.stats["steps dispatched twice after a genuine lease expiry"] = len(redispatches)
    print(f"\ngalera node killed: {verdict.stats}")
    assert not verdict.problems, "\n".join(verdict.problems[:40])
