"""Runner processes on a Galera cluster, one per node: start them on published runs, wait until
every run ended, and gather what the journals, the rows and the nodes say.

Shared by ``tests/galera/test_runners.py`` and ``bench/galera.py``. The child processes are the
fault tests' own (``tests/reliability/child_runner.py``): each journals every dispatch with the
lease it holds, and reports the conflicts its transactions retried (``runner.db.CONFLICTS``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from tests.reliability.child_runner import ANNOUNCE
from tests.reliability.harness import (
    Child,
    Journals,
    all_steps,
    publish_and_start,
    read_journals,
    run_statuses,
)
from tests.support.definitions import event, phase, step
from tests.support.galera_cluster import GaleraCluster

SCOPES_PER_DEFINITION = 100
# Nothing moves a run on from these without a human: the fleet stops waiting (and the judges
# say why a run did not complete).
ENDED = ("completed", "failed", "cancelled", "paused")
# wsrep_local_cert_failures: this node's transactions refused at certification (at COMMIT);
# wsrep_local_bf_aborts: this node's open transactions aborted by another node's certified write.
NODE_COUNTERS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")


def spec(n: int, scopes: int, steps: int) -> dict[str, Any]:
    return event(
        f"galera-{n}",
        phase("one", *(step(ANNOUNCE, {"text": f"s{i}"}, on_failure=None) for i in range(steps))),
        title=f"Galera {n}",
        scopes=[f"g{n}s{i}" for i in range(scopes)],
    )


async def publish_runs(url: str, runs: int, steps: int) -> None:
    engine = create_engine(url)
    controls = Controls(engine, clock=SystemClock())
    try:
        n = 0
        while runs > 0:
            scopes = min(runs, SCOPES_PER_DEFINITION)
            await publish_and_start(engine, controls, spec(n, scopes, steps))
            runs -= scopes
            n += 1
    finally:
        await engine.dispose()


def node_counters(cluster: GaleraCluster) -> dict[int, dict[str, int]]:
    counters = {}
    for node in cluster.nodes:
        if node.running():
            counters[node.index] = {k: int(v) for k, v in cluster.status(node.index, *NODE_COUNTERS).items()}
    return counters


@dataclass
class Fleet:
    """What one fleet of runner processes did."""

    seconds: float
    statuses: dict[int, str]
    rows: list[sa.RowMapping]
    journals: Journals
    codes: list[int]
    owners: list[str]
    #: the conflicts each child's retry_on_conflict met, from its last stats line
    retried: dict[str, dict[str, int]]
    #: per node, the change in its wsrep conflict counters over the fleet's life
    node_conflicts: dict[int, dict[str, int]] = field(default_factory=dict)
    logs: str = ""

    def steps_per_second(self) -> float:
        return len(self.rows) / self.seconds

    def conflicts_retried(self) -> int:
        return sum(c.get("conflicts_retried", 0) for c in self.retried.values())

    def conflicts_gave_up(self) -> int:
        return sum(c.get("conflicts_gave_up", 0) for c in self.retried.values())

    def summary(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "runs": len(self.statuses),
            "steps": len(self.rows),
            "steps per second": round(self.steps_per_second(), 1),
            "dispatches": len(self.journals.dispatches),
            "dispatches per runner": dict(Counter(d.owner for d in self.journals.dispatches)),
            "conflicts retried": self.conflicts_retried(),
            "conflicts that ran out of attempts": self.conflicts_gave_up(),
            "node conflict counters": self.node_conflicts,
            "database errors logged": self.logs.count("database error"),
        }


def _grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """How much each counter grew; a node restarted meanwhile counts from zero again."""
    return {k: v - before.get(k, 0) if v >= before.get(k, 0) else v for k, v in after.items()}


def _last_counts(path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    if not path.exists():
        return found
    for text in path.read_text().splitlines():
        line = json.loads(text)
        if line["event"] in ("stats", "stopped") and "conflicts_retried" in line:
            found = {k: int(line[k]) for k in ("conflicts_retried", "conflicts_gave_up")}
    return found


async def run_fleet(
    cluster: GaleraCluster | None,
    urls: list[str],
    workdir: Path,
    *,
    options: dict[str, Any],
    finish_within: float,
    during: Callable[[list[Child], float], Awaitable[None]] | None = None,
    watch_url: str | None = None,
) -> Fleet:
    """One child runner per URL, until every run has ended (or ``finish_within`` runs out, which
    fails). ``during(children, fraction_done)`` is awaited on every poll, for a fault test to strike."""
    before = node_counters(cluster) if cluster else {}
    watcher = create_engine(watch_url or urls[0])
    children: list[Child] = []
    try:
        started = time.monotonic()
        children = [
            await Child.start(url, f"runner-{i}", workdir, seed=i, **options) for i, url in enumerate(urls)
        ]
        await asyncio.gather(*(c.ready() for c in children))
        deadline = time.monotonic() + finish_within
        while True:
            statuses = await run_statuses(watcher)
            ended = sum(1 for s in statuses.values() if s in ENDED)
            if ended == len(statuses):
                break
            dead = [c.owner for c in children if not c.alive()]
            if dead or time.monotonic() > deadline:
                raise AssertionError(
                    f"runs not ended {dict(Counter(s for s in statuses.values() if s not in ENDED))}, "
                    f"dead runners {dead}:\n" + "\n".join(c.stderr_tail() for c in children)
                )
            if during is not None:
                await during(children, ended / max(len(statuses), 1))
            await asyncio.sleep(0.2)
        seconds = time.monotonic() - started
        codes = [await c.stop() for c in children]
        rows = await all_steps(watcher)
    finally:
        for child in children:
            await child.kill()
        await watcher.dispose()
    after = node_counters(cluster) if cluster else {}
    node_conflicts = {node: _grown(before.get(node, {}), counts) for node, counts in after.items()}
    return Fleet(
        seconds=seconds,
        statuses=statuses,
        rows=rows,
        journals=read_journals(c.journal for c in children),
        codes=codes,
        owners=[c.owner for c in children],
        retried={c.owner: _last_counts(c.journal) for c in children},
        node_conflicts=node_conflicts,
        logs="\n".join(c.stderr.read_text(errors="replace") for c in children),
    )


# The child runners' options, for the cluster tests and the bench alike.
CHILD: dict[str, Any] = {
    "lease_seconds": 20,
    "margin_seconds": 10,
    "budget_ms": 2000,
    "max_sleep": 0.004,
    "retry_seconds": 1.0,
    "interval": 0.2,
    "concurrent_runs": 16,
}
