"""A real runner in a process of its own, for the fault tests to kill, race and starve.

    .venv/bin/python -m tests.reliability.child_runner --url URL --owner NAME --log PATH \\
        [--lease-seconds S] [--margin-seconds S] [--budget-ms MS] [--max-sleep S] ...

It builds the production pieces (``runner.db.create_engine``, ``Runner``, ``RunnerLoop``) with
short leases and three actions that journal every dispatch to ``PATH``, one JSON line each,
written with a single ``write`` and fsync'd, so a SIGKILL can cut a dispatch short but never a
line in half:

* ``rel.announce`` stands in for ``discord.announce``: it sleeps a random moment, *delivers*
  (a ``deliver`` line carrying the step's idempotency key: what Discord would receive), sleeps
  again and answers ok. A kill in the first sleep loses nothing; a kill in the second leaves a
  message delivered but a step unsettled, which a fresh runner dispatches again with the same key.
* ``rel.wait`` answers ``holdFor`` like ``core.wait``.
* ``rel.cue`` delivers a cue and parks; the parent confirms it with ``Controls.confirm``.

Every dispatch opens with a ``begin`` line that records the lease it is dispatched under, read
back from the step's own row by a separate engine: ``claimed_by``, ``claim_expires_at`` and
``attempts`` as the claim committed them. The action cannot see its lease any other way, and the
row is authoritative: nobody else may touch a step while its lease is live. That line is what lets
the race test *prove* that a second dispatch of a step came after the first one's lease ran out,
rather than assume it.

The process prints ``ready`` on stdout once its engine answers, stops cleanly on SIGTERM, and
writes a ``stats`` line (ticks, failures, outages of its loop, and the lock or certification
conflicts its transactions retried or gave up on: ``runner.db.CONFLICTS``) every second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import sys
import time
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.ext.asyncio import AsyncEngine

from actions.webhook import webhook_action
from runner.clock import utcnow
from runner.db import CONFLICTS, create_engine, is_sqlite
from runner.engine import Runner, RunnerSettings
from runner.loop import RunnerLoop
from runner.registry import Action, ActionRegistry, Envelope
from runner.schema import steps
from tests.support.actions import build_action
from wiring.game_targets import WebhookTarget

ANNOUNCE = "rel.announce"
WAIT = "rel.wait"
CUE = "rel.cue"
# Where ``--webhook-url``'s signing secret is read from (the parent sets it).
WEBHOOK_SECRET_ENV = "RELIABILITY_WEBHOOK_SECRET"
# A reminder's action is fixed (``runner.definitions.REMINDER_ACTION``): this journals it too.
REMINDER = "discord.announce"


class Journal:
    """Append-only JSON lines; one ``os.write`` per line (O_APPEND), fsync'd."""

    def __init__(self, path: str, owner: str) -> None:
        self.owner = owner
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, event: str, **fields: Any) -> None:
        line = {"event": event, "owner": self.owner, "pid": os.getpid(), "wall": time.time(), **fields}
        os.write(self.fd, (json.dumps(line, default=str) + "\n").encode())
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class AnnounceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""


class WaitParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float


class CueParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""


class ReminderParams(BaseModel):
    model_config = ConfigDict(extra="allow")


def build_registry(journal: Journal, probe: AsyncEngine, args: argparse.Namespace) -> ActionRegistry:
    async def lease_of(envelope: Envelope) -> dict[str, Any]:
        """The step row as this dispatch's claim left it (see the module docstring)."""
        async with probe.connect() as conn:
            row = (
                (
                    await conn.execute(
                        sa.select(
                            steps.c.claimed_by,
                            steps.c.claim_expires_at,
                            steps.c.attempts,
                            steps.c.idempotency_key,
                            steps.c.status,
                        ).where(steps.c.id == envelope.step_id)
                    )
                )
                .mappings()
                .one()
            )
        return {
            "claimed_by": row["claimed_by"],
            "lease_until": row["claim_expires_at"].isoformat() if row["claim_expires_at"] else None,
            "attempts": int(row["attempts"]),
            "row_key": row["idempotency_key"],
            "row_status": row["status"],
        }

    def ids(envelope: Envelope, action: str) -> dict[str, Any]:
        return {
            "action": action,
            "step_id": envelope.step_id,
            "run_id": envelope.run_id,
            "key": envelope.idempotency_key,
        }

    async def begin(envelope: Envelope, action: str) -> None:
        # ``at`` is taken before the probe: the dispatch was certainly under way by then.
        at = utcnow().isoformat()
        lease = await lease_of(envelope)
        journal.write("begin", at=at, **ids(envelope, action), **lease)

    async def announce(envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        await begin(envelope, ANNOUNCE)
        await asyncio.sleep(random.uniform(0, args.max_sleep / 2))
        journal.write("deliver", at=utcnow().isoformat(), **ids(envelope, ANNOUNCE))
        await asyncio.sleep(random.uniform(0, args.max_sleep / 2))
        journal.write("end", at=utcnow().isoformat(), **ids(envelope, ANNOUNCE))
        return {"ok": True}

    async def wait(envelope: Envelope, params: WaitParams) -> dict[str, Any]:
        await begin(envelope, WAIT)
        journal.write("end", at=utcnow().isoformat(), **ids(envelope, WAIT))
        return {"ok": True, "holdFor": params.seconds}

    async def cue(envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        await begin(envelope, CUE)
        await asyncio.sleep(random.uniform(0, args.max_sleep / 2))
        journal.write("deliver", at=utcnow().isoformat(), **ids(envelope, CUE))
        journal.write("end", at=utcnow().isoformat(), **ids(envelope, CUE))
        return {"ok": True, "await": "human"}

    async def remind(envelope: Envelope, params: BaseModel) -> dict[str, Any]:
        # ``--reminder-hang``: the claim is committed and the dispatch begun, the delivery not
        # yet made, for as long as the parent needs to kill the process right there.
        await begin(envelope, REMINDER)
        await asyncio.sleep(args.reminder_hang)
        journal.write("deliver", at=utcnow().isoformat(), **ids(envelope, REMINDER))
        journal.write("end", at=utcnow().isoformat(), **ids(envelope, REMINDER))
        return {"ok": True}

    def action(action_id: str, model: type[BaseModel], perform: Any) -> Action:
        return build_action(action_id, perform, budget_ms=args.budget_ms, params_model=model)

    registry = ActionRegistry()
    registry.register(
        "reliability",
        [
            action(ANNOUNCE, AnnounceParams, announce),
            action(WAIT, WaitParams, wait),
            action(CUE, CueParams, cue),
            action(REMINDER, ReminderParams, remind),
        ],
    )
    if getattr(args, "webhook_url", None):  # in-process callers hand a Namespace of their own
        # The real ``webhook.post``, to the parent's receiver as the target ``game``, signed with
        # the secret the parent put in this process's environment.
        target = WebhookTarget(url=args.webhook_url, secret_env=WEBHOOK_SECRET_ENV)

        async def no_context(run_id: int, step_id: int) -> None:
            return None

        registry.register("webhook", [webhook_action({"game": target}, no_context, budget_ms=args.budget_ms)])
    return registry


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--log", required=True, help="the journal (JSON lines)")
    parser.add_argument("--lease-seconds", type=float, default=1.0, help="run lease")
    parser.add_argument("--margin-seconds", type=float, default=0.5, help="step lease = budget + this")
    parser.add_argument("--budget-ms", type=int, default=1000, help="every action's budget")
    parser.add_argument("--max-sleep", type=float, default=0.1, help="announce sleeps up to this")
    parser.add_argument("--retry-seconds", type=float, default=1.0)
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--concurrent-runs", type=int, default=64)
    parser.add_argument("--steps-per-tick", type=int, default=25)
    parser.add_argument("--interval", type=float, default=0.2, help="the loop's longest sleep")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--hold-seconds",
        type=float,
        default=0.0,
        help="waits up to this long are slept through in process, as the serving bot does",
    )
    parser.add_argument(
        "--after-step-seconds",
        type=float,
        default=None,
        help="how long the run's lease outlasts its step's (default: --lease-seconds)",
    )
    parser.add_argument(
        "--housekeeping-seconds",
        type=float,
        default=0.0,
        help="the reclaim and the other housekeeping run once per this long (0: every tick)",
    )
    parser.add_argument(
        "--reminder-hang", type=float, default=0.0, help="a reminder waits this before delivering"
    )
    parser.add_argument("--webhook-url", default=None, help="webhook.post's target 'game' posts here")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    engine = create_engine(args.url)
    # The lease probe gets a pool of its own, so a dispatch never waits on the runner's one
    # SQLite connection (and never holds it while the runner waits).
    probe = create_engine(args.url) if is_sqlite(args.url) else create_engine(args.url, pool_size=4)
    journal = Journal(args.log, args.owner)
    settings = RunnerSettings(
        run_lease_seconds=args.lease_seconds,
        step_lease_margin_seconds=args.margin_seconds,
        retry_seconds=args.retry_seconds,
        max_attempts=args.max_attempts,
        concurrent_runs=args.concurrent_runs,
        steps_per_tick=args.steps_per_tick,
        hold_in_process_seconds=args.hold_seconds,
        housekeeping_seconds=args.housekeeping_seconds,
        run_lease_after_step_seconds=args.after_step_seconds,
    )
    runner = Runner(engine, build_registry(journal, probe, args), owner=args.owner, settings=settings)
    loop = RunnerLoop(runner, interval=args.interval)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, loop.stop)

    async with engine.connect() as conn:
        await conn.execute(sa.text("SELECT 1"))
    journal.write("ready", settings=settings.__dict__)
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    async def stats() -> None:
        while True:
            await asyncio.sleep(1.0)
            journal.write(
                "stats",
                ticks=loop.state.ticks,
                failures=loop.state.failures,
                outages=loop.state.outages,
                **CONFLICTS.as_dict(),
            )

    reporter = asyncio.create_task(stats())
    try:
        await loop.run_forever()
    finally:
        reporter.cancel()
        journal.write(
            "stopped",
            ticks=loop.state.ticks,
            failures=loop.state.failures,
            outages=loop.state.outages,
            **CONFLICTS.as_dict(),
        )
        journal.close()
        await engine.dispose()
        await probe.dispose()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.seed is not None:
        random.seed(args.seed)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format=f"%(asctime)s {args.owner} %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
