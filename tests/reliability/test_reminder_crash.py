"""Crash: a runner process is SIGKILLed between a reminder's claim and its delivery (issue 11).

A reminder is sent while its run is still ``scheduled``, by a visit that is not the run's drive,
so it needs the promise of every step on its own: the claim commits before the action runs, a
dead runner's lease is handed back by the reclaim (without the run being ``running`` and without
touching ``attempts``), and a fresh runner sends it once, with the key the claim already sent.

The first child's reminder action hangs after its ``begin`` line (the claim is committed and the
dispatch under way, nothing delivered); the parent kills it there. A second child takes over:
the reminder is delivered once, every dispatch of it carries the step's one key, its row ends
``done`` after two attempts, the run log says ``reminder.sent`` once, and the occurrence starts
and completes on time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path

import pytest

from runner import catalog
from runner.clock import utcnow
from runner.db import create_engine
from runner.definitions import REMINDERS_PHASE, EventDefinition
from runner.history import Actor
from runner.views import log_for_run
from tests.reliability.child_runner import ANNOUNCE, REMINDER
from tests.reliability.harness import Child, all_steps, read_journals, run_statuses
from tests.support.definitions import event, phase, step

CHILD = {"lease_seconds": 0.5, "margin_seconds": 0.5, "budget_ms": 3000, "interval": 0.2}
# The occurrence starts this long after publishing; its one reminder is due 10 s before that.
START_AFTER = 16.0
LEAD = 10.0


async def wait_for(condition: object, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"timed out after {within:.0f} s waiting for {what}")


# SIGKILLs a child runner process.
pytestmark = pytest.mark.slow


async def test_a_runner_killed_between_a_reminders_claim_and_its_delivery_sends_it_once_by_one_nonce(
    backend: str, database_url: str, tmp_path: Path
) -> None:
    engine = create_engine(database_url)
    start = (utcnow() + dt.timedelta(seconds=START_AFTER)).replace(microsecond=0)
    spec = event(
        "reminded",
        phase("main", step(ANNOUNCE, {"text": "doors open"}, on_failure=None)),
        schedule={"once": start.replace(tzinfo=dt.UTC).isoformat()},
        reminders=[{"before": LEAD, "channel": "announcements", "content": "starts {start_relative}"}],
    )
    await catalog.publish(
        engine, EventDefinition.model_validate(spec), utcnow(), actor=Actor(None, "reliability")
    )
    children: list[Child] = []
    try:
        first = await Child.start(
            database_url, f"remind-{backend}-killed", tmp_path, reminder_hang=30, **CHILD
        )
        children.append(first)
        await first.ready()

        async def begun() -> bool:
            return bool(read_journals([first.journal]).events("begin"))

        await wait_for(begun, START_AFTER, "the first child to claim and begin the reminder")
        await first.kill()
        (began,) = read_journals([first.journal]).events("begin")
        assert began["action"] == REMINDER and began["row_status"] == "running"
        assert read_journals([first.journal]).events("deliver") == []

        fresh = await Child.start(database_url, f"remind-{backend}-fresh", tmp_path, **CHILD)
        children.append(fresh)
        await fresh.ready()

        async def completed() -> bool:
            statuses = await run_statuses(engine)
            return bool(statuses) and all(s == "completed" for s in statuses.values())

        await wait_for(completed, START_AFTER + 30, "the occurrence to start and complete")
        assert await fresh.stop() == 0, fresh.stderr_tail()
        rows = await all_steps(engine)
        (reminder,) = [r for r in rows if r["phase"] == REMINDERS_PHASE]
        log = await log_for_run(engine, int(reminder["run_id"]))
    finally:
        for child in children:
            await child.kill()
        await engine.dispose()

    journals = read_journals(c.journal for c in children)
    begins = [b for b in journals.events("begin") if b["step_id"] == reminder["id"]]
    delivered = [d for d in journals.events("deliver") if d["step_id"] == reminder["id"]]
    assert [b["owner"] for b in begins] == [first.owner, fresh.owner]
    assert [b["attempts"] for b in begins] == [1, 2], "the reclaim must not touch attempts"
    assert {b["key"] for b in begins} == {reminder["idempotency_key"]}, "one nonce for every dispatch"
    assert len(delivered) == 1 and delivered[0]["key"] == reminder["idempotency_key"]
    assert (reminder["status"], reminder["attempts"]) == ("done", 2)
    kinds = [entry.kind for entry in log]
    assert kinds.count("reminder.sent") == 1 and "step.reclaimed" in kinds
    # The second dispatch came after the dead runner's lease ran out, not while it held it.
    assert dt.datetime.fromisoformat(begins[1]["at"]) >= dt.datetime.fromisoformat(begins[0]["lease_until"])
