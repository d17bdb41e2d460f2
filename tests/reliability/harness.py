"""The parent's side of the fault tests: starting and killing child runners, reading their
journals back, and the two judgements every fault test makes from them.

* **What a member saw.** ``DedupingChannel`` replays deliveries the way Discord treats a message
  sent with ``enforce_nonce``: the first message per nonce is posted, every later one with the same
  nonce is answered with the original and shown to nobody. A step delivered twice with one key is
  one announcement; two steps sharing a key would be one announcement too many swallowed, which is
  why keys are also checked to be unique per step.
* **Why a step went out twice.** ``prove_redispatches`` takes each pair of consecutive dispatches
  of one step and shows, from the leases the dispatches themselves read off the step row, that the
  second claim was made after the first lease had run out. The claim computes its lease as
  ``now + budget + margin`` from the claimer's clock, so the instant of the second claim is exactly
  ``lease_until - step_lease``; every process runs on this machine's clock, so "after" means after.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import itertools
import json
import os
import signal
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner import definitions as defs
from runner.controls import Controls
from runner.db import create_engine
from runner.history import Actor
from runner.migrate import upgrade
from runner.registry import ActionRegistry
from runner.schema import runs, steps
from tests.reliability.child_runner import (
    ANNOUNCE,
    CUE,
    WAIT,
    AnnounceParams,
    CueParams,
    WaitParams,
)
from tests.support.actions import build_action
from tests.support.mariadb_server import ThrowawayMariaDB

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
DELIVERING = (ANNOUNCE, CUE)


# ── Environment ─────────────────────────────────────────────────────────────


def in_ci() -> bool:
    """The rule ``tests/conftest.py`` applies: in CI a missing MariaDB fails, it never skips."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def run_in_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a loop of its own: session fixtures are first requested from inside a
    test's running loop, where ``asyncio.run`` is refused."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def server_url(server: ThrowawayMariaDB | str, database: str) -> str:
    if isinstance(server, str):
        return make_url(server).set(database=database).render_as_string(hide_password=False)
    return server.url(database)


async def _as_admin(server: ThrowawayMariaDB | str, statement: str) -> None:
    admin = create_engine(server_url(server, "mysql"))
    try:
        async with admin.begin() as conn:
            await conn.exec_driver_sql(statement)
    finally:
        await admin.dispose()


async def fresh_mariadb_database(server: ThrowawayMariaDB | str) -> tuple[str, str]:
    """Create and migrate a database of its own on the session server; (name, url)."""
    name = f"eventbot_rel_{uuid.uuid4().hex[:10]}"
    await _as_admin(server, f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    url = server_url(server, name)
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()
    return name, url


async def drop_mariadb_database(server: ThrowawayMariaDB | str, name: str) -> None:
    await _as_admin(server, f"DROP DATABASE IF EXISTS `{name}`")


@contextlib.asynccontextmanager
async def own_mariadb_database(server: ThrowawayMariaDB | str) -> AsyncIterator[str]:
    """The url of a fresh migrated database on the session server, dropped afterwards."""
    name, url = await fresh_mariadb_database(server)
    try:
        yield url
    finally:
        await drop_mariadb_database(server, name)


# ── Child processes ─────────────────────────────────────────────────────────


class Child:
    """One ``tests.reliability.child_runner`` process; only this object ever signals it."""

    def __init__(self, owner: str, journal: Path, stderr: Path, process: asyncio.subprocess.Process) -> None:
        self.owner = owner
        self.journal = journal
        self.stderr = stderr
        self.process = process
        self.killed = False

    @classmethod
    async def start(cls, url: str, owner: str, workdir: Path, **options: Any) -> Child:
        journal = workdir / f"{owner}.jsonl"
        stderr = workdir / f"{owner}.stderr"
        command = [
            sys.executable,
            "-m",
            "tests.reliability.child_runner",
            "--url",
            url,
            "--owner",
            owner,
            "--log",
            str(journal),
        ]
        for name, value in options.items():
            command += [f"--{name.replace('_', '-')}", str(value)]
        with stderr.open("wb") as err:
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=REPO,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
            )
        return cls(owner, journal, stderr, process)

    async def ready(self, within: float = 30.0) -> None:
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), within)
        except TimeoutError:
            line = b""
        if line.strip() != b"ready":
            await self.kill()
            raise AssertionError(f"child {self.owner} did not come up:\n{self.stderr_tail()}")

    async def kill(self) -> None:
        """SIGKILL, the crash we test: no handler runs, no transaction commits, no line is added."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            self.killed = True
        await self.process.wait()

    async def stop(self, within: float = 30.0) -> int:
        """SIGTERM: the loop finishes its tick and the process exits 0."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), within)
            except TimeoutError:
                await self.kill()
        return int(self.process.returncode or 0)

    def alive(self) -> bool:
        return self.process.returncode is None

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            text = self.stderr.read_text(errors="replace")
        except OSError:
            return "<no stderr>"
        return "\n".join(text.splitlines()[-lines:])


# ── Journals ────────────────────────────────────────────────────────────────


def _instant(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)


@dataclass
class Dispatch:
    """One call of an action, as its own journal tells it."""

    owner: str
    action: str
    step_id: int
    run_id: int
    key: str
    at: dt.datetime
    claimed_by: str | None
    lease_until: dt.datetime | None
    attempts: int
    row_key: str
    row_status: str
    deliveries: int = 0
    ended_at: dt.datetime | None = None


@dataclass
class Journals:
    lines: list[dict[str, Any]]
    dispatches: list[Dispatch]
    # (step_id, key, owner) per delivery, in the order each owner's journal recorded them.
    deliveries: list[tuple[int, str, str]]

    def by_step(self) -> dict[int, list[Dispatch]]:
        grouped: dict[int, list[Dispatch]] = defaultdict(list)
        for d in self.dispatches:
            grouped[d.step_id].append(d)
        for group in grouped.values():
            group.sort(key=lambda d: (d.attempts, d.at))
        return grouped

    def events(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == event]


def read_journals(paths: Iterable[Path]) -> Journals:
    lines: list[dict[str, Any]] = []
    dispatches: list[Dispatch] = []
    deliveries: list[tuple[int, str, str]] = []
    for path in paths:
        if not path.exists():
            continue  # killed before it wrote anything
        open_by_step: dict[int, Dispatch] = {}
        for number, text in enumerate(path.read_text().splitlines(), 1):
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                raise AssertionError(f"{path}:{number}: a torn journal line: {text!r}") from exc
            lines.append(line)
            event = line["event"]
            if event == "begin":
                d = Dispatch(
                    owner=line["owner"],
                    action=line["action"],
                    step_id=int(line["step_id"]),
                    run_id=int(line["run_id"]),
                    key=line["key"],
                    at=dt.datetime.fromisoformat(line["at"]),
                    claimed_by=line["claimed_by"],
                    lease_until=_instant(line["lease_until"]),
                    attempts=int(line["attempts"]),
                    row_key=line["row_key"],
                    row_status=line["row_status"],
                )
                dispatches.append(d)
                open_by_step[d.step_id] = d
            elif event == "deliver":
                open_by_step[int(line["step_id"])].deliveries += 1
                deliveries.append((int(line["step_id"]), line["key"], line["owner"]))
            elif event == "end":
                open_by_step[int(line["step_id"])].ended_at = dt.datetime.fromisoformat(line["at"])
    return Journals(lines, dispatches, deliveries)


class DedupingChannel:
    """A channel that posts the first message per nonce and swallows the rest, as Discord does
    for a message sent with ``enforce_nonce``."""

    def __init__(self) -> None:
        self.shown: dict[str, int] = {}
        self.swallowed = 0

    def receive(self, step_id: int, key: str) -> None:
        if key in self.shown:
            self.swallowed += 1
        else:
            self.shown[key] = step_id

    def shown_per_step(self) -> dict[int, int]:
        counts: dict[int, int] = defaultdict(int)
        for step_id in self.shown.values():
            counts[step_id] += 1
        return dict(counts)


# ── Lease proofs ────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Redispatch:
    step_id: int
    first: Dispatch
    second: Dispatch
    second_claimed_at: dt.datetime
    genuine: bool
    cause: str

    def describe(self) -> str:
        return (
            f"step {self.step_id}: {self.first.owner} (attempt {self.first.attempts}, lease until "
            f"{self.first.lease_until}) then {self.second.owner} (attempt {self.second.attempts}, "
            f"claimed at {self.second_claimed_at}; first ended {self.first.ended_at}): "
            f"{'after' if self.genuine else 'BEFORE'} the first lease ran out; {self.cause}"
        )


def prove_redispatches(
    journals: Journals, step_lease: dt.timedelta, killed_owners: set[str]
) -> list[Redispatch]:
    """Every consecutive pair of dispatches of one step, with whether the second claim came after
    the first lease expired and what left the first lease to expire."""
    found = []
    for step_id, group in journals.by_step().items():
        for first, second in itertools.pairwise(group):
            assert first.lease_until is not None and second.lease_until is not None
            claimed_at = second.lease_until - step_lease
            genuine = claimed_at > first.lease_until and second.attempts > first.attempts
            if first.owner in killed_owners and first.ended_at is None:
                cause = "the first runner was SIGKILLed mid-dispatch"
            elif first.owner in killed_owners:
                cause = "the first runner was SIGKILLed after the action returned, before the step settled"
            elif first.ended_at is not None and first.ended_at > first.lease_until:
                cause = "the first dispatch overran its lease"
            elif first.ended_at is not None:
                cause = "the first dispatch ended within its lease, but its settle never landed"
            else:
                cause = "the first dispatch never ended, yet its process was not killed"
            found.append(Redispatch(step_id, first, second, claimed_at, genuine, cause))
    return found


def lease_violations(journals: Journals) -> list[str]:
    """Dispatches that were not under a live lease of their own when they began."""
    wrong = []
    for d in journals.dispatches:
        if d.claimed_by != d.owner or d.lease_until is None or d.row_status != "running":
            wrong.append(
                f"step {d.step_id} dispatched by {d.owner} while the row said claimed_by="
                f"{d.claimed_by!r}, lease {d.lease_until}, status {d.row_status}"
            )
        elif d.at > d.lease_until:
            wrong.append(
                f"step {d.step_id} dispatched by {d.owner} at {d.at}, after its lease {d.lease_until}"
            )
        if d.row_key != d.key:
            wrong.append(f"step {d.step_id}: the envelope's key {d.key} is not the row's {d.row_key}")
    return wrong


# ── Database ────────────────────────────────────────────────────────────────


def registry_for_validation() -> ActionRegistry:
    """The child's actions, for validating definitions in the parent (never performed here)."""

    async def never(envelope: Any, params: Any) -> dict[str, Any]:
        raise AssertionError("the parent does not dispatch")

    registry = ActionRegistry()
    registry.register(
        "reliability",
        [
            build_action(ANNOUNCE, never, params_model=AnnounceParams),
            build_action(WAIT, never, params_model=WaitParams, risk="none"),
            build_action(CUE, never, params_model=CueParams),
        ],
    )
    return registry


async def publish_and_start(engine: AsyncEngine, controls: Controls, spec: dict[str, Any]) -> tuple[int, ...]:
    definition = defs.validate(spec, registry_for_validation())
    await catalog.publish(engine, definition, controls.clock.now(), actor=Actor(None, "reliability"))
    started = await controls.start(definition.key, actor=Actor(None, "reliability"))
    assert started.ok, started.message
    return started.run_ids


async def confirm_parked(engine: AsyncEngine, controls: Controls) -> int:
    """Play the game master: confirm every cue that is waiting."""
    async with engine.connect() as conn:
        parked = (
            (
                await conn.execute(
                    sa.select(steps.c.id).where(
                        steps.c.status == "running", steps.c.claim_expires_at.is_(None)
                    )
                )
            )
            .scalars()
            .all()
        )
    confirmed = 0
    for step_id in parked:
        if (await controls.confirm(int(step_id), actor=Actor(None, "gm"))).ok:
            confirmed += 1
    return confirmed


async def run_statuses(engine: AsyncEngine) -> dict[int, str]:
    async with engine.connect() as conn:
        return {int(r.id): r.status for r in (await conn.execute(sa.select(runs.c.id, runs.c.status))).all()}


async def all_steps(engine: AsyncEngine) -> list[sa.RowMapping]:
    async with engine.connect() as conn:
        return list((await conn.execute(sa.select(steps).order_by(steps.c.id))).mappings().all())


@dataclass
class Verdict:
    """What the journals and the database say together."""

    problems: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.problems.append(message)


def judge_completion(
    statuses: dict[int, str], rows: list[sa.RowMapping], steps_per_run: int, verdict: Verdict
) -> None:
    """No run stuck, no step lost: every run completed with every step of every phase done."""
    verdict.check(set(statuses.values()) == {"completed"}, f"run statuses: {Counter(statuses.values())}")
    verdict.check(
        len(rows) == steps_per_run * len(statuses),
        f"{len(rows)} steps for {len(statuses)} runs of {steps_per_run} steps: a phase was never materialised",
    )
    not_done = [(r["id"], r["status"], r["last_error"]) for r in rows if r["status"] != "done"]
    verdict.check(not not_done, f"steps not done: {not_done[:20]}")


def judge_leases(
    journals: Journals, step_lease: dt.timedelta, killed_owners: set[str], verdict: Verdict
) -> list[Redispatch]:
    """Each dispatch ran under a live lease of its own, and a step went out again only after a
    genuine lease expiry; the redispatches, for the caller's own stricter checks and stats."""
    verdict.problems.extend(lease_violations(journals))
    redispatches = prove_redispatches(journals, step_lease, killed_owners)
    verdict.problems.extend(r.describe() for r in redispatches if not r.genuine)
    return redispatches


def judge_deliveries(journals: Journals, rows: list[sa.RowMapping], verdict: Verdict) -> DedupingChannel:
    """Every delivering step delivered at least once, always with its own row's key, keys unique
    per step, and a key-deduping channel shows each such step exactly once."""
    keys_by_step = {int(r["id"]): r["idempotency_key"] for r in rows}
    verdict.check(len(set(keys_by_step.values())) == len(keys_by_step), "two steps share an idempotency key")
    delivering = {int(r["id"]) for r in rows if r["action_id"] in DELIVERING}
    delivered: dict[int, set[str]] = defaultdict(set)
    channel = DedupingChannel()
    for step_id, key, _owner in journals.deliveries:
        delivered[step_id].add(key)
        channel.receive(step_id, key)
    lost = sorted(delivering - set(delivered))
    verdict.check(not lost, f"steps never delivered: {lost[:20]}")
    for step_id, keys in delivered.items():
        verdict.check(
            keys == {keys_by_step.get(step_id)},
            f"step {step_id} was delivered with keys {sorted(keys)}, its row has {keys_by_step.get(step_id)}",
        )
    shown = channel.shown_per_step()
    twice = {s: n for s, n in shown.items() if n != 1}
    verdict.check(not twice, f"a key-deduping channel shows these steps more than once: {twice}")
    verdict.check(
        sorted(shown) == sorted(delivering),
        f"the channel shows {len(shown)} announcements for {len(delivering)} delivering steps",
    )
    per_step = defaultdict(int)
    for step_id, _key, _owner in journals.deliveries:
        per_step[step_id] += 1
    verdict.stats["deliveries"] = len(journals.deliveries)
    verdict.stats["steps delivered more than once"] = sum(1 for n in per_step.values() if n > 1)
    verdict.stats["deliveries swallowed by the nonce"] = channel.swallowed
    return channel
