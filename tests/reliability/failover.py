"""Failover: two runner processes share one database; one is SIGKILLed in the middle of an event
and the other carries every run the dead one held on. Shared by the fault test
(``test_failover.py``: one kill) and the benchmark (``bench/failover.py``: ten kills).

One *round*: a definition of ``STEPS`` steps (announce, wait, announce, ...) is published and
started in ``RUNS`` scopes while both processes serve (a loop as the bot's, waits slept through
in process, housekeeping once per ``housekeeping_seconds``). A second into the event, the
process holding more of its runs (a run lease, or a step lease, in the database) is SIGKILLed. The runs it held at that
instant are read back; the takeover time of the round is, over those runs, the longest time from
the kill to the survivor's first dispatch of one of their steps (each dispatch journals its
instant before anything else: ``child_runner``). Then the round's runs must all complete, and
the journals are judged as the crash test judges them: every step done, every dispatch under a
live lease of its own, a second dispatch of a step only after its lease genuinely ran out and
with the same key, and a key-deduping channel (Discord's nonce) showing each delivery once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.clock import utcnow
from runner.controls import Controls
from runner.schema import runs, steps
from tests.reliability.child_runner import ANNOUNCE, WAIT
from tests.reliability.harness import (
    Child,
    Journals,
    Verdict,
    judge_completion,
    judge_deliveries,
    judge_leases,
    publish_and_start,
    read_journals,
)
from tests.support.definitions import event, phase, step

RUNS = 8
# announce, wait, announce, ... : long enough that every run is in flight when the kill lands.
STEPS = 9
WAIT_SECONDS = 1.0
GOAL_SECONDS = 20.0


@dataclass(frozen=True)
class Leases:
    """The lease settings both processes run with (``RunnerSettings``' names in the comments)."""

    run_lease_seconds: float  # run_lease_seconds
    margin_seconds: float  # step_lease_margin_seconds
    budget_ms: int  # every action's budget: a step lease is budget + margin
    housekeeping_seconds: float  # how often the reclaim runs
    hold_seconds: float = 30.0  # hold_in_process_seconds, as the serving bot
    interval: float = 1.0
    after_step_seconds: float | None = None  # run_lease_after_step_seconds (None: the run lease)
    # The longest an announcement takes (a random sleep up to this): a Discord send, for rounds
    # that must land the kill while a step is being sent.
    send_seconds: float = 0.05

    def child_options(self) -> dict[str, Any]:
        return {
            "lease_seconds": self.run_lease_seconds,
            "margin_seconds": self.margin_seconds,
            "budget_ms": self.budget_ms,
            "housekeeping_seconds": self.housekeeping_seconds,
            "hold_seconds": self.hold_seconds,
            "interval": self.interval,
            **(
                {"after_step_seconds": self.after_step_seconds} if self.after_step_seconds is not None else {}
            ),
            "max_sleep": self.send_seconds,
            "max_attempts": 10,
        }

    @property
    def step_lease(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.budget_ms / 1000 + self.margin_seconds)

    def worst_case_seconds(self) -> float:
        """The longest a run can wait after its holder dies, at the survivor's tick: a step
        claimed just before the kill keeps its lease for budget + margin, and at that tick's
        reclaim the dead holder's run lease goes with it; a run at a wait held in process is
        leased to its wake + the run lease (it was not due before its wake); a run between steps
        keeps its run lease, and in the moment between a step's settle and the hold's lease write
        that is still the last claim's, budget + margin + ``after_step``. The survivor's loop wakes
        at each lease end (``run_leases.next_wake``); a tick it is in the middle of (sending)
        delays that by the tick's length, which these bounds do not count."""
        after = self.run_lease_seconds if self.after_step_seconds is None else self.after_step_seconds
        return max(self.budget_ms / 1000 + self.margin_seconds + after, self.run_lease_seconds)


@dataclass
class Round:
    held: list[int]
    takeover_seconds: float
    per_run: dict[int, float]
    killed: str = ""
    verdict: Verdict = field(default_factory=Verdict)
    # The held runs whose step the victim was sending when it died (its lease still on the
    # step after the kill): they wait for the step's lease, the longest path.
    mid_send: list[int] = field(default_factory=list)


def _spec(key: str) -> dict[str, Any]:
    body = []
    for index in range(STEPS):
        if index % 2:
            body.append(step(WAIT, {"seconds": WAIT_SECONDS}))
        else:
            body.append(step(ANNOUNCE, {"text": f"{key} {index}"}))
    return event(key, phase("main", *body), scopes=[f"s{i}" for i in range(RUNS)])


async def _held_by(engine: AsyncEngine, owner: str, run_ids: tuple[int, ...]) -> list[int]:
    """The round's runs ``owner`` holds now: their run lease, or a step under its lease."""
    async with engine.connect() as conn:
        by_run = (
            await conn.execute(
                sa.select(runs.c.id).where(
                    runs.c.id.in_(run_ids), runs.c.claimed_by == owner, runs.c.claim_expires_at.is_not(None)
                )
            )
        ).scalars()
        by_step = (
            await conn.execute(
                sa.select(steps.c.run_id).where(
                    steps.c.run_id.in_(run_ids), steps.c.claimed_by == owner, steps.c.status == "running"
                )
            )
        ).scalars()
        return sorted({int(r) for r in by_run} | {int(r) for r in by_step})


async def _sending(engine: AsyncEngine, owner: str, run_ids: tuple[int, ...]) -> list[int]:
    """The round's runs with a step under ``owner``'s lease (being sent, not parked)."""
    async with engine.connect() as conn:
        leased = await conn.execute(
            sa.select(steps.c.run_id).where(
                steps.c.run_id.in_(run_ids),
                steps.c.claimed_by == owner,
                steps.c.status == "running",
                steps.c.claim_expires_at.is_not(None),
            )
        )
        return sorted({int(r) for r in leased.scalars()})


async def _statuses(engine: AsyncEngine, run_ids: tuple[int, ...]) -> dict[int, str]:
    async with engine.connect() as conn:
        rows = await conn.execute(sa.select(runs.c.id, runs.c.status).where(runs.c.id.in_(run_ids)))
        return {int(r.id): r.status for r in rows}


async def _steps_of(engine: AsyncEngine, run_ids: tuple[int, ...]) -> list[sa.RowMapping]:
    async with engine.connect() as conn:
        query = sa.select(steps).where(steps.c.run_id.in_(run_ids)).order_by(steps.c.id)
        return list((await conn.execute(query)).mappings().all())


def _first_dispatch_after(
    journals: Journals, owner: str, run_id: int, after: dt.datetime
) -> dt.datetime | None:
    times = [d.at for d in journals.dispatches if d.owner == owner and d.run_id == run_id and d.at > after]
    return min(times, default=None)


def _of_round(journals: Journals, run_ids: tuple[int, ...]) -> Journals:
    mine = set(run_ids)
    dispatches = [d for d in journals.dispatches if d.run_id in mine]
    step_ids = {d.step_id for d in dispatches}
    deliveries = [d for d in journals.deliveries if d[0] in step_ids]
    return Journals(journals.lines, dispatches, deliveries)


async def _holders(engine: AsyncEngine, children: tuple[Child, Child], run_ids: tuple[int, ...]) -> list[int]:
    """How many of the round's runs each child holds now."""
    return [len(await _held_by(engine, child.owner, run_ids)) for child in children]


async def one_round(
    engine: AsyncEngine,
    controls: Controls,
    first: Child,
    second: Child,
    leases: Leases,
    *,
    finish_within: float = 180.0,
    mid_send: bool = False,
) -> Round:
    """Start a round's runs, kill whichever process holds more of them (the two race for every
    run; either may have them all), time the takeover by the other, let it finish the round,
    and judge it. ``mid_send``: the kill lands only while the victim is sending a step (most of
    the time its runs sit in waits held in process). The caller replaces the process killed
    (``Round.killed``)."""
    key = f"failover-{uuid.uuid4().hex[:8]}"
    run_ids = await publish_and_start(engine, controls, _spec(key))
    children = (first, second)
    # Mid-event: let the runs get under way first, then land the kill while one holds runs.
    await asyncio.sleep(1.0)
    async with asyncio.timeout(60):
        while True:
            counts = await _holders(engine, children, run_ids)
            if max(counts):
                victim, survivor = children if counts[0] >= counts[1] else children[::-1]
                held = await _held_by(engine, victim.owner, run_ids)
                if held and (not mid_send or await _sending(engine, victim.owner, run_ids)):
                    killed_at = utcnow()
                    await victim.kill()
                    break
            await asyncio.sleep(0.02)
    # The runs the victim held as it died, read after the kill (what it wrote last is there).
    held = sorted(set(held) | set(await _held_by(engine, victim.owner, run_ids)))
    sending = await _sending(engine, victim.owner, run_ids)
    per_run: dict[int, float] = {}
    async with asyncio.timeout(finish_within):
        while True:
            statuses = await _statuses(engine, run_ids)
            journals = read_journals([survivor.journal])
            for run_id in held:
                if run_id not in per_run:
                    at = _first_dispatch_after(journals, survivor.owner, run_id, killed_at)
                    if at is not None:
                        per_run[run_id] = (at - killed_at).total_seconds()
            if set(statuses.values()) == {"completed"}:
                # A held run the survivor never had to touch was finished by the victim in the
                # moment between the read and the kill: nothing of it was left to carry on.
                held = sorted(per_run)
                break
            if not survivor.alive():
                raise AssertionError(f"the survivor died:\n{survivor.stderr_tail()}")
            await asyncio.sleep(0.1)
    if not held:
        raise AssertionError("the victim finished every run it held before the kill landed")
    result = Round(
        held,
        max(per_run.values()),
        per_run,
        killed=victim.owner,
        mid_send=[r for r in sending if r in per_run],
    )
    journals = _of_round(read_journals([victim.journal, survivor.journal]), run_ids)
    rows = await _steps_of(engine, run_ids)
    judge_completion(await _statuses(engine, run_ids), rows, STEPS, result.verdict)
    judge_leases(journals, leases.step_lease, {victim.owner}, result.verdict)
    judge_deliveries(journals, rows, result.verdict)
    return result


@contextlib.contextmanager
def cores_kept_busy(loaded: bool) -> Iterator[None]:
    """One spinning process per core for the round: the promise holds on a loaded machine."""
    burners = (
        [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
        if loaded
        else []
    )
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


async def start_child(url: str, owner: str, workdir: Path, leases: Leases) -> Child:
    child = await Child.start(url, owner, workdir, **leases.child_options())
    await child.ready()
    return child
