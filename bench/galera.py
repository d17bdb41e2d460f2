"""Galera: steps per second with three runner processes, one per node of a three-node cluster,
against one runner process on one node of the same cluster and one on a plain MariaDB, in one run.

Each fleet works through the same workload on a fresh migrated database: ``RUNS`` runs (300 with
``--quick``) of ``STEPS`` announcements each, started together, served by real runner processes
(the fault tests' ``tests/reliability/child_runner.py``) until every run completed. The figure is
steps settled per second of wall time, first dispatch to last completion. Every fleet is also
judged exactly-once from its journals (each step dispatched once, each delivery with its own key);
a fleet that fails that is a MISS whatever its speed.

The conflicts are reported two ways: what the runners' ``retry_on_conflict`` retried (each
child's ``runner.db.CONFLICTS``) and the nodes' own ``wsrep_local_cert_failures`` and
``wsrep_local_bf_aborts``.

Runs only beside the ``mariadb`` backend (the cluster is its own backend; the SQLite pass skips
it). No target: the issue asks for the ratio to be measured, not for a bound.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path

from bench.backends import Backend, fresh_database
from bench.results import Options, Result
from tests.galera.conftest import own_galera_database
from tests.galera.fleet import CHILD, Fleet, publish_runs, run_fleet
from tests.reliability.harness import Verdict, judge_completion, judge_deliveries
from tests.support.galera_cluster import GaleraCluster

RUNS, QUICK_RUNS = 1000, 300
STEPS = 2


def _exactly_once(fleet: Fleet) -> list[str]:
    verdict = Verdict()
    judge_completion(fleet.statuses, fleet.rows, STEPS, verdict)
    per_step = Counter(d.step_id for d in fleet.journals.dispatches)
    verdict.check(set(per_step.values()) == {1}, f"dispatches per step: {Counter(per_step.values())}")
    verdict.check(len(per_step) == len(fleet.rows), f"{len(per_step)} of {len(fleet.rows)} steps dispatched")
    judge_deliveries(fleet.journals, fleet.rows, verdict)
    return verdict.problems


async def _fleet(cluster: GaleraCluster | None, urls: list[str], runs: int) -> Fleet:
    await publish_runs(urls[0], runs, STEPS)
    with tempfile.TemporaryDirectory(prefix="eventbot-bench-galera-") as workdir:
        return await run_fleet(cluster, urls, Path(workdir), options=CHILD, finish_within=1200)


async def run(backend: Backend, options: Options) -> list[Result]:
    if backend.name != "mariadb":
        return []
    runs = QUICK_RUNS if options.quick else RUNS
    cluster = GaleraCluster(verbose=False)
    await asyncio.to_thread(cluster.start)
    try:
        async with own_galera_database(cluster) as database:
            three = await _fleet(cluster, database.urls, runs)
        async with own_galera_database(cluster) as database:
            one_node = await _fleet(cluster, database.urls[:1], runs)
        async with fresh_database(backend) as url:
            plain = await _fleet(None, [url], runs)
    finally:
        await asyncio.to_thread(cluster.stop)

    problems = {
        name: _exactly_once(f) for name, f in (("3 nodes", three), ("1 node", one_node), ("plain", plain))
    }
    details = [
        f"cluster started in {cluster.started_in:.1f} s; {runs} runs x {STEPS} steps per fleet",
        f"three runners, one per node: {three.summary()}",
        f"one runner on node 0: {one_node.summary()}",
        f"one runner on a plain MariaDB: {plain.summary()}",
        *(f"NOT EXACTLY ONCE ({name}): {p[:5]}" for name, p in problems.items() if p),
    ]
    exact = not any(problems.values())
    conflicts = (
        f"conflicts retried {three.conflicts_retried()}, gave up {three.conflicts_gave_up()}; nodes: "
        + "; ".join(
            f"node {n} cert failures {c['wsrep_local_cert_failures']}, bf aborts {c['wsrep_local_bf_aborts']}"
            for n, c in sorted(three.node_conflicts.items())
        )
    )
    details.insert(1, conflicts)
    return [
        Result(
            "galera",
            "galera",
            f"{three.steps_per_second():.1f} steps/s (3 runners, 3 nodes)",
            f"{one_node.steps_per_second():.1f} steps/s (1 runner, 1 node)",
            three.steps_per_second() / one_node.steps_per_second(),
            "reported; exactly once",
            exact,
            details,
        ),
        Result(
            "galera",
            "galera",
            f"{three.steps_per_second():.1f} steps/s (3 runners, 3 nodes)",
            f"{plain.steps_per_second():.1f} steps/s (1 runner, plain MariaDB)",
            three.steps_per_second() / plain.steps_per_second(),
            "reported; exactly once",
            exact,
            [],
        ),
    ]
