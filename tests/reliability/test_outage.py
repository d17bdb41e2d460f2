"""Outage: MariaDB goes away for 10 s while runs are in flight, and comes back.

The promise (issue 4; STYLE "background loops that cannot die"): the runner process stays up,
logs the outage a bounded number of times (``RunnerLoop`` says "database unreachable" once per
outage and "reachable again" once; the engine logs a run's database error once per run per
distinct message), and every run finishes, each step delivered under its own key.

The server is a ``ThrowawayMariaDB`` of this test's own, never the session's: the test stops
it. Twenty runs of waits and announcements are spread over 10-20 s, the serving loop is started
in-process with production backoff (1 s doubling to 60 s), and 3 s in the server is stopped
(``stopped``: a clean shutdown, clients are told so) or SIGKILLed (``killed``: a crash, sockets
reset mid-query), kept down for 10 s, and started again on the same port.

Leases are shortened (run 5 s, step = 1 s budget + 3 s margin) because a tick cut off by the
outage cannot give its run back; the run waits out its lease, which at the production 60 s would
only make this test slow, not different.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runner.clock import SystemClock
from runner.controls import Controls
from runner.db import create_engine
from runner.engine import Runner, RunnerSettings
from runner.loop import RunnerLoop
from runner.migrate import upgrade
from tests.reliability.child_runner import ANNOUNCE, WAIT, Journal, build_registry
from tests.reliability.harness import (
    Verdict,
    all_steps,
    in_ci,
    judge_completion,
    judge_deliveries,
    judge_leases,
    publish_and_start,
    read_journals,
    run_statuses,
)
from tests.support.definitions import event
from tests.support.mariadb_server import ThrowawayMariaDB, find_mariadbd
from tests.support.world import World, phase, step

OUTAGE_SECONDS = 10.0
OUTAGE_AFTER = 3.0
WAITS = (1.5, 2.5, 3.5, 5.0)  # per definition; each run waits three times
SCOPES = 5
FINISH_WITHIN = 120.0
BUDGET_MS = 1000
SETTINGS = RunnerSettings(run_lease_seconds=5.0, step_lease_margin_seconds=3.0, retry_seconds=2.0)
STEP_LEASE = dt.timedelta(seconds=BUDGET_MS / 1000 + SETTINGS.step_lease_margin_seconds)
# At most this many "database unreachable" lines for one outage.
UNREACHABLE_LINES_MAX = 3


def outage_spec(n: int, wait_seconds: float) -> dict[str, Any]:
    def announce(text: str) -> dict[str, Any]:
        return step(ANNOUNCE, {"text": text}, on_failure=None)

    hold = step(WAIT, {"seconds": wait_seconds}, on_failure=None)
    return event(
        f"outage-{n}",
        phase("a", announce("one"), hold, announce("two"), hold),
        phase("b", announce("three"), hold, announce("four")),
        title=f"Outage {n}",
        scopes=[f"o{n}s{i}" for i in range(SCOPES)],
    )


STEPS_PER_RUN = 7


@pytest.fixture
async def own_server() -> Any:
    if find_mariadbd() is None:
        reason = "no mariadbd on this machine (install mariadb-server)"
        if in_ci():
            pytest.fail(f"the outage test must run in CI, but: {reason}", pytrace=False)
        pytest.skip(f"OUTAGE TEST SKIPPED (outside CI only): {reason}")
    server = ThrowawayMariaDB(verbose=False)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


@pytest.mark.slow
# A 10 s outage timed by the wall clock, the runs spread over 10-20 s: alone on the cores.
@pytest.mark.realtime
@pytest.mark.mariadb
@pytest.mark.parametrize("how", ["stopped", "killed"])
async def test_a_ten_second_mariadb_outage_is_ridden_out_and_every_run_finishes(
    how: str, own_server: ThrowawayMariaDB, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    await asyncio.to_thread(own_server.create_database, "outage")
    url = own_server.url("outage")
    engine = create_engine(url)  # the runner's
    watcher = create_engine(url)  # the test's own reads, never the runner's pool
    probe = create_engine(url)  # the actions' lease probe
    await upgrade(watcher)
    journal_path = tmp_path / "outage.jsonl"
    journal = Journal(str(journal_path), "outage")
    registry = build_registry(journal, probe, argparse.Namespace(budget_ms=BUDGET_MS, max_sleep=0.05))
    runner = Runner(engine, registry, owner="outage", settings=SETTINGS)
    loop = RunnerLoop(runner, interval=1.0)
    controls = Controls(watcher, clock=SystemClock())
    task: asyncio.Task[None] | None = None
    try:
        for n, seconds in enumerate(WAITS):
            await publish_and_start(watcher, controls, outage_spec(n, seconds))
        task = asyncio.create_task(loop.run_forever())

        await asyncio.sleep(OUTAGE_AFTER)
        in_flight = Counter((await run_statuses(watcher)).values())
        down_at = time.monotonic()
        await asyncio.to_thread(own_server.stop_server if how == "stopped" else own_server.kill_hard)
        while time.monotonic() - down_at < OUTAGE_SECONDS:
            assert not task.done(), f"the serving loop ended during the outage: {task}"
            await asyncio.sleep(0.25)
        failures_while_down = loop.state.failures
        await asyncio.to_thread(own_server.restart)
        up_at = time.monotonic()

        deadline = up_at + FINISH_WITHIN
        while True:
            assert not task.done(), f"the serving loop ended after the outage: {task}"
            statuses = await run_statuses(watcher)
            if all(s == "completed" for s in statuses.values()):
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"runs not finished {FINISH_WITHIN:.0f} s after the restart: {Counter(statuses.values())}"
                )
            await asyncio.sleep(0.25)
        finished_at = time.monotonic()
        rows = await all_steps(watcher)
    finally:
        loop.stop()
        if task is not None:
            await asyncio.wait_for(task, 30)
        journal.close()
        for each in (engine, watcher, probe):
            await each.dispose()

    records = [r for r in caplog.records if r.name.startswith("runner")]
    messages = [r.getMessage() for r in records]
    unreachable = [m for m in messages if "database unreachable" in m]
    recovered = [m for m in messages if "reachable again" in m]
    per_run: dict[str, list[str]] = {}
    for r in records:
        if r.name == "runner.engine":
            run, _, message = r.getMessage().partition(":")
            per_run.setdefault(run, []).append(message)

    verdict = Verdict()
    verdict.check(
        in_flight.get("scheduled", 0) < sum(in_flight.values()),
        f"nothing in flight at the outage: {in_flight}",
    )
    verdict.check(
        1 <= len(unreachable) <= UNREACHABLE_LINES_MAX, f"'unreachable' logged {len(unreachable)} times"
    )
    verdict.check(
        len(recovered) == len(unreachable), f"{len(recovered)} recoveries for {len(unreachable)} outages"
    )
    verdict.check(loop.state.outages == 1, f"the loop counted {loop.state.outages} outages for one")
    repeated = {run: lines for run, lines in per_run.items() if len(lines) != len(set(lines))}
    verdict.check(not repeated, f"a run logged the same database error twice: {repeated}")
    judge_completion(statuses, rows, STEPS_PER_RUN, verdict)

    journals = read_journals([journal_path])
    redispatches = judge_leases(journals, STEP_LEASE, set(), verdict)
    judge_deliveries(journals, rows, verdict)
    noise = Counter(r.name for r in caplog.records if not r.name.startswith("runner"))
    verdict.stats.update(
        {
            "in flight at the outage": dict(in_flight),
            "tick failures while down": failures_while_down,
            "unreachable lines": len(unreachable),
            "runs that logged a database error": len(per_run),
            "engine lines per run": dict(Counter(len(lines) for lines in per_run.values())),
            "redispatches": dict(Counter(r.cause for r in redispatches)),
            "finished after restart (s)": round(finished_at - up_at, 1),
            "other loggers' warnings": dict(noise),
            "asyncmy says": sorted({r.getMessage()[:60] for r in caplog.records if r.name == "asyncmy"})[:2],
        }
    )
    print(f"\noutage[{how}]: {verdict.stats}")
    assert not verdict.problems, "\n".join(verdict.problems[:40])


@pytest.mark.mariadb
async def test_starting_a_run_on_mariadb_logs_no_warning(
    mariadb_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found on the outage test's first run: every run start re-created its first phase's steps
    with INSERT IGNORE, and asyncmy logged the server's duplicate-key warning per step, 81 lines
    for 20 runs around the one line the outage deserved."""
    caplog.set_level(logging.WARNING)
    engine = create_engine(mariadb_url)
    try:
        world = World(engine)
        world.register(world.scripted.action("test.ok"))
        run_id = await world.seed_run([phase("main", step("test.ok"), step("test.ok"), step("test.ok"))])
        await world.tick()
        assert (await world.run(run_id))["status"] == "completed"
    finally:
        await engine.dispose()
    warnings = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warnings, f"a healthy run start logged {len(warnings)} warnings: {warnings}"
