"""The reference model behind ``tests/runner/test_model.py``: the run and step state machines of
``../shared/DESIGN.md`` as data, what each control must answer given the database it acted on,
and the invariants every state of the database must satisfy.

The model is deliberately small. It does not re-implement the runner; it says which moves are
legal (the edges), when a control must say yes and what a yes must have changed, and which
states must never be seen (an open step on an ended run, a stale lease, a lost occurrence). The
machine in the test drives the real runner and controls and calls :func:`check_state` after every
rule and :func:`check_answer` after every control.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from cronsim import CronSim
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.schema import RUN_HOLDS_KEY, RUN_IN_FLIGHT, RUN_TERMINAL, run_log, runs, steps

MAX_ATTEMPTS = 3

# ── The state machines ──────────────────────────────────────────────────────
# A step's state splits ``running`` in two: ``leased`` (a runner is dispatching it) and
# ``parked`` (a cue waiting for a human, NULL lease).
STEP_EDGES: dict[str, frozenset[str]] = {
    "pending": frozenset({"leased", "skipped", "cancelled"}),
    # leased -> cancelled: a dispatch that comes back, or is reclaimed, after its run ended.
    "leased": frozenset({"done", "parked", "pending", "failed", "cancelled"}),
    "parked": frozenset({"done", "skipped", "cancelled"}),
    "failed": frozenset({"pending"}),
}
RUN_EDGES: dict[str, frozenset[str]] = {
    "scheduled": frozenset({"starting", "missed", "cancelled"}),
    "starting": frozenset({"running", "cancelled"}),
    "running": frozenset({"paused", "ending", "failed", "cancelled"}),
    # paused -> failed: a step given up by the reclaim while the run was paused applies its
    # ``abort_run`` like any other failure (the design table is silent on the paused case).
    "paused": frozenset({"running", "failed", "cancelled"}),
    "ending": frozenset({"completed", "cancelled"}),
}


def _closure(edges: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    reach: dict[str, set[str]] = {}
    for start in {*edges, *(t for ts in edges.values() for t in ts)}:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    return {k: frozenset(v) for k, v in reach.items()}


STEP_REACH = _closure(STEP_EDGES)
RUN_REACH = _closure(RUN_EDGES)


def step_state(row: dict[str, Any]) -> str:
    if row["status"] == "running":
        return "parked" if row["claim_expires_at"] is None else "leased"
    return str(row["status"])


# ── Reading the whole database ──────────────────────────────────────────────


@dataclass(frozen=True)
class Snapshot:
    runs: dict[int, dict[str, Any]]
    steps: dict[int, dict[str, Any]]
    log: list[dict[str, Any]]

    def steps_of(self, run_id: int) -> list[dict[str, Any]]:
        return [s for s in self.steps.values() if s["run_id"] == run_id]

    def view(self, run_id: int) -> tuple[Any, ...]:
        """Everything the database holds about one run: what a refused control must not change."""
        return (
            self.runs.get(run_id),
            sorted((s["id"], tuple(sorted(s.items()))) for s in self.steps_of(run_id)),
            [line["id"] for line in self.log if line["run_id"] == run_id],
        )


async def read(engine: AsyncEngine, run_id: int | None = None) -> Snapshot:
    """The whole database, or (``run_id``) one run with its steps and log: the small read a
    control pressed mid-dispatch can afford inside the action's budget."""
    run_query, step_query = sa.select(runs), sa.select(steps)
    log_query = sa.select(run_log).order_by(run_log.c.id)
    if run_id is not None:
        run_query = run_query.where(runs.c.id == run_id)
        step_query = step_query.where(steps.c.run_id == run_id)
        log_query = log_query.where(run_log.c.run_id == run_id)
    async with engine.connect() as conn:
        run_rows = (await conn.execute(run_query)).mappings().all()
        step_rows = (await conn.execute(step_query)).mappings().all()
        lines = (await conn.execute(log_query)).mappings().all()
    return Snapshot(
        {int(r["id"]): dict(r) for r in run_rows},
        {int(s["id"]): dict(s) for s in step_rows},
        [dict(line) for line in lines],
    )


# ── What the machine remembers beyond the database ──────────────────────────


@dataclass
class Dispatch:
    step_id: int
    key: str
    attempts: int
    at: dt.datetime
    lease_until: dt.datetime
    owner: str
    finished: bool = False


@dataclass
class Ledger:
    """Every perform call, the cues that went out and were closed, and what broke the rules
    while a tick was running (an assertion inside an action would be read as a transient
    failure by the dispatcher, so problems are collected and raised by the machine)."""

    dispatches: dict[int, list[Dispatch]] = field(default_factory=lambda: defaultdict(list))
    requeued: set[int] = field(default_factory=set)
    posted: set[int] = field(default_factory=set)
    closed: set[int] = field(default_factory=set)
    dead_owners: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)

    def on_dispatch(self, row: dict[str, Any] | None, key: str, now: dt.datetime) -> Dispatch | None:
        if row is None:
            self.violations.append(f"a dispatch names step that does not exist (key {key})")
            return None
        step_id = int(row["id"])
        where = f"step {step_id} (run {row['run_id']})"
        if step_state(row) != "leased" or row["claim_expires_at"] <= now:
            self.violations.append(f"{where} dispatched without a live lease: {step_state(row)}")
        if key != row["idempotency_key"]:
            self.violations.append(f"{where} dispatched under key {key}, not its own")
        history = self.dispatches[step_id]
        previous = history[-1] if history else None
        if previous is not None:
            if key != previous.key:
                self.violations.append(f"{where} dispatched again under a new key")
            if not previous.finished and not previous.lease_until < now:
                self.violations.append(
                    f"{where} dispatched twice: the first dispatch is still out and its lease "
                    f"runs until {previous.lease_until}, now is {now}"
                )
        fresh = previous is None or step_id in self.requeued
        expected = 1 if fresh else previous.attempts + 1  # type: ignore[union-attr]
        if row["attempts"] != expected:
            self.violations.append(f"{where} dispatched with attempts {row['attempts']}, expected {expected}")
        self.requeued.discard(step_id)
        dispatch = Dispatch(
            step_id, key, int(row["attempts"]), now, row["claim_expires_at"] or now, row["claimed_by"] or ""
        )
        history.append(dispatch)
        return dispatch

    def unfinished(self, step_id: int) -> bool:
        history = self.dispatches.get(step_id)
        return bool(history) and not history[-1].finished


# ── Controls: what the answer must be ───────────────────────────────────────

RUN_CONTROLS = ("pause", "resume", "cancel", "retry")
STEP_CONTROLS = ("confirm", "skip", "click_confirm", "click_skip")
SETTLES = ("running", "paused")


def retry_target(before: Snapshot, run_id: int) -> dict[str, Any] | None:
    """The failed step a retry would requeue, or None: the furthest started step of the current
    phase, when it failed."""
    run = before.runs.get(run_id)
    if run is None or run["status"] not in SETTLES or not run["current_phase"]:
        return None
    started = [
        s for s in before.steps_of(run_id) if s["phase"] == run["current_phase"] and s["status"] != "pending"
    ]
    if not started:
        return None
    furthest = max(started, key=lambda s: s["seq"])
    return furthest if furthest["status"] == "failed" else None


def predict(kind: str, target: int, before: Snapshot) -> bool | None:
    """Must the control say yes (True), no (False), or may it go either way (None)?"""
    if kind in RUN_CONTROLS:
        run = before.runs.get(target)
        status = run["status"] if run else None
        if kind == "pause":
            return status == "running"
        if kind == "resume":
            return status == "paused"
        if kind == "cancel":
            return status in RUN_IN_FLIGHT
        return retry_target(before, target) is not None
    step = before.steps.get(target)
    if step is None:
        return False
    run_status = before.runs[step["run_id"]]["status"]
    state = step_state(step)
    if kind == "confirm":
        return state == "parked" and run_status in SETTLES
    if kind in ("click_confirm", "click_skip"):
        # A button acts on a posted GM cue of a live run, whatever step id it carries.
        return state == "parked" and step["action_id"] == "gm.cue" and run_status in SETTLES
    # /event skip: a pending step or a parked cue of a run in flight; never leased or failed.
    if state not in ("pending", "parked") or run_status not in RUN_IN_FLIGHT:
        return False
    return True if run_status in SETTLES else None


def run_of(kind: str, target: int, before: Snapshot) -> int | None:
    if kind in RUN_CONTROLS:
        return target
    step = before.steps.get(target)
    return None if step is None else int(step["run_id"])


def check_answer(
    kind: str, target: int, ok: bool, message: str, before: Snapshot, after: Snapshot, *, whole: bool
) -> list[str]:
    """Problems with one control's answer: a yes must have made its change and only that, a no
    must have changed nothing. ``whole``: nothing else ran meanwhile, so the whole database is
    compared; otherwise (a control pressed while a tick is out) only the target's run."""
    said = f"{kind}({target}) answered {'yes' if ok else 'no'} ({message!r})"
    problems = []
    expected = predict(kind, target, before)
    if expected is not None and expected != ok:
        problems.append(f"{said}, the model says it must answer {'yes' if expected else 'no'}")
    run_id = run_of(kind, target, before)
    if not ok:
        if whole and (before.runs != after.runs or before.steps != after.steps or before.log != after.log):
            problems.append(f"{said} yet the database changed")
        elif run_id is not None and before.view(run_id) != after.view(run_id):
            problems.append(f"{said} yet run {run_id} changed")
        return problems
    if run_id is None:
        return [*problems, f"{said} on something that does not exist"]
    status = after.runs[run_id]["status"]
    wanted = {"pause": "paused", "resume": "running", "cancel": "cancelled", "retry": "running"}.get(kind)
    if wanted is not None and status != wanted:
        problems.append(f"{said} but run {run_id} is {status}")
    if kind == "cancel":
        for step in before.steps_of(run_id):
            now_state = step_state(after.steps[step["id"]])
            state = step_state(step)
            if state in ("pending", "parked") and now_state != "cancelled":
                problems.append(f"{said} but its {state} step {step['id']} is {now_state}")
    if kind == "retry":
        failed = retry_target(before, run_id)
        row = after.steps[failed["id"]] if failed else None
        if row is None or row["status"] != "pending" or row["attempts"] != 0:
            problems.append(f"{said} but the failed step was not requeued with attempts 0")
    if kind in STEP_CONTROLS:
        state = step_state(after.steps[target])
        wanted = "done" if kind.endswith("confirm") else "skipped"
        if state != wanted:
            problems.append(f"{said} but step {target} is {state}")
    if whole:
        for other, row in before.runs.items():
            if other != run_id and _quiet(row) != _quiet(after.runs[other]):
                problems.append(f"{said} and changed run {other} as well")
        for sid, row in before.steps.items():
            if row["run_id"] != run_id and row != after.steps[sid]:
                problems.append(f"{said} and changed step {sid} of run {row['run_id']}")
    return problems


def _quiet(row: dict[str, Any]) -> dict[str, Any]:
    # Ending a run wakes the runs waiting for its concurrency key: their wake time moves.
    return {k: v for k, v in row.items() if k not in ("wake_at", "nudges", "updated_at")}


# ── The invariants ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Versions:
    """What the model published: each version's phases as (action, on_failure) lists, and the
    version each definition currently points at."""

    phases: dict[int, dict[str, list[tuple[str, str]]]]
    current: dict[int, int]
    cron: dict[int, tuple[str, dt.datetime]]  # definition id -> (expression, first published)
    grace: dict[int, int]
    # definition id -> [(published at, version id)], oldest first
    history: dict[int, list[tuple[dt.datetime, int]]] = field(default_factory=dict)

    def in_force(self, definition_id: int, moment: dt.datetime) -> int | None:
        """The version a scheduled occurrence at ``moment`` belongs to: the latest one published
        at or before it (an occurrence at the publishing instant is the new version's)."""
        found = None
        for published_at, version_id in self.history.get(definition_id, []):
            if published_at <= moment:
                found = version_id
        return found


def cron_moments(expression: str, after: dt.datetime, until: dt.datetime) -> list[dt.datetime]:
    """Every occurrence in ``(after, until]`` (UTC), worked out here rather than by the runner."""
    found = []
    for moment in CronSim(expression, after.replace(tzinfo=dt.UTC)):
        naive = moment.astimezone(dt.UTC).replace(tzinfo=None)
        if naive > until:
            return found
        if naive > after:
            found.append(naive)
    return found


def check_state(
    before: Snapshot,
    after: Snapshot,
    ledger: Ledger,
    versions: Versions,
    *,
    ticked_at: dt.datetime | None,
) -> list[str]:
    """Every invariant over one move of the database. ``ticked_at``: a tick ran at that instant
    (and nothing is out on a live runner)."""
    problems: list[str] = []
    requeued = {line["step_id"] for line in after.log[len(before.log) :] if line["kind"] == "step.requeued"}
    keys: dict[str, int] = {}
    for sid, row in after.steps.items():
        state = step_state(row)
        where = f"step {sid} (run {row['run_id']}, {row['phase']}#{row['seq']})"
        if keys.setdefault(row["idempotency_key"], sid) != sid:
            problems.append(f"{where} shares its idempotency key with step {keys[row['idempotency_key']]}")
        if not 0 <= row["attempts"] <= MAX_ATTEMPTS:
            problems.append(f"{where} has attempts {row['attempts']}")
        old = before.steps.get(sid)
        if old is None:
            if state not in STEP_REACH["pending"]:
                problems.append(f"{where} appeared as {state}")
            continue
        fixed = ("run_id", "phase", "seq", "idempotency_key", "action_id", "on_failure")
        if any(old[k] != row[k] for k in fixed):
            problems.append(f"{where} changed identity: {[k for k in fixed if old[k] != row[k]]}")
        if state not in STEP_REACH[step_state(old)]:
            problems.append(f"{where} moved {step_state(old)} -> {state}, not an edge of the model")
        if row["attempts"] < old["attempts"] and sid not in requeued:
            problems.append(f"{where} attempts fell {old['attempts']} -> {row['attempts']} without a retry")
        if state == "leased" and row["claimed_by"] not in ledger.dead_owners:
            problems.append(f"{where} is leased by {row['claimed_by']} after its tick finished")
    for run_id, run in after.runs.items():
        problems.extend(_check_run(run_id, run, before, after, ledger, versions, ticked_at))
    problems.extend(_check_log_chains(after))
    problems.extend(_check_cues(after, ledger))
    if ticked_at is not None:
        problems.extend(_check_occurrences(before, after, versions, ticked_at))
    problems.extend(ledger.violations)
    ledger.violations.clear()
    return problems


def _check_run(
    run_id: int,
    run: dict[str, Any],
    before: Snapshot,
    after: Snapshot,
    ledger: Ledger,
    versions: Versions,
    ticked_at: dt.datetime | None,
) -> Iterable[str]:
    status = run["status"]
    where = f"run {run_id} ({status})"
    old = before.runs.get(run_id)
    if old is None:
        expected = versions.current[run["definition_id"]]
        if run["started_by"] == "schedule":
            # An occurrence the runner works out late (it was down when a new version came) is
            # created under the version that was in force at its moment, not today's.
            expected = versions.in_force(run["definition_id"], run["scheduled_for"]) or expected
        if run["version_id"] != expected:
            yield (
                f"{where} was created from version {run['version_id']}, not {expected}, the one in "
                "force at its moment"
            )
    else:
        if status not in RUN_REACH[old["status"]]:
            yield f"{where} moved {old['status']} -> {status}, not an edge of the model"
        # Issue 11: a publish re-points an occurrence not yet started (scheduled, its moment
        # after the publish) to the new version, the one now in force at its moment.
        follows = old["status"] == "scheduled" and run["version_id"] == versions.in_force(
            run["definition_id"], run["scheduled_for"]
        )
        if old["scheduled_for"] != run["scheduled_for"] or (
            old["version_id"] != run["version_id"] and not follows
        ):
            yield f"{where} changed its version or its occurrence"
    if run["claimed_by"] is not None and run["claimed_by"] not in ledger.dead_owners:
        yield f"{where} is still leased by {run['claimed_by']} after its tick finished"
    if status != "scheduled" and (run["last_error"] or "").startswith("waiting:"):
        yield f"{where} still says {run['last_error']!r}"
    holds = run["concurrency_key"] if status in RUN_HOLDS_KEY else None
    if run["concurrency_slot"] != holds:
        yield f"{where} has concurrency slot {run['concurrency_slot']!r}, expected {holds!r}"
    spec = versions.phases[run["version_id"]]
    mine = after.steps_of(run_id)
    for step in mine:
        actions = spec.get(step["phase"], [])
        if step["seq"] >= len(actions) or (step["action_id"], step["on_failure"]) != actions[step["seq"]]:
            yield f"{where}: step {step['id']} is not what its version says"
    if status in RUN_TERMINAL:
        for step in mine:
            state = step_state(step)
            if state in ("pending", "parked"):
                yield f"{where} has an open step {step['id']} ({state})"
            if state == "leased" and not ledger.unfinished(step["id"]):
                yield f"{where} has step {step['id']} leased with no dispatch out"
    if status == "completed":
        total = sum(len(v) for v in spec.values())
        settled = [s for s in mine if s["status"] in ("done", "skipped", "failed")]
        if len(settled) != total or len(mine) != total:
            yield f"{where} completed with {len(settled)} of {total} steps settled"
    if ticked_at is not None and status == "scheduled":
        grace = versions.grace[run["definition_id"]]
        if run["scheduled_for"] + dt.timedelta(seconds=grace) < ticked_at:
            yield f"{where} is past its grace window at the tick of {ticked_at} and not missed"


def _check_log_chains(after: Snapshot) -> Iterable[str]:
    chains: dict[int, list[str]] = defaultdict(list)
    for line in after.log:
        if line["kind"] == "run.status":
            chains[line["run_id"]].append(line["detail"]["to"])
    for run_id, run in after.runs.items():
        at = "scheduled"
        for to in chains.get(run_id, []):
            if to not in RUN_EDGES.get(at, ()):
                yield f"run {run_id}: its log moves {at} -> {to}, not an edge of the model"
            at = to
        if at != run["status"]:
            yield f"run {run_id} is {run['status']} but its log last says {at}"


def _check_cues(after: Snapshot, ledger: Ledger) -> Iterable[str]:
    """A cue that went out keeps live buttons until a control settles it or the runner closes it;
    so every posted cue is parked on a live run, or was closed."""
    for sid in sorted(ledger.posted - ledger.closed):
        step = after.steps[sid]
        run = after.runs[step["run_id"]]
        if not (step_state(step) == "parked" and run["status"] in SETTLES):
            yield (
                f"step {sid}: its cue was posted and is still live, but the step is "
                f"{step_state(step)} on a {run['status']} run"
            )


def _check_occurrences(
    before: Snapshot, after: Snapshot, versions: Versions, ticked_at: dt.datetime
) -> Iterable[str]:
    """Occurrences are worked out a bounded number at a time, so right after a tick some that
    are due may not exist yet; but they are never skipped (no gap before one that exists), and a
    tick that leaves a due one out made progress on that definition."""
    for definition_id, (expression, published) in versions.cron.items():
        # An occurrence at the very instant of the first publish is one too.
        published -= dt.timedelta(microseconds=1)
        now_made, then_made = _scheduled(after, definition_id), _scheduled(before, definition_id)
        horizon = max(now_made | {ticked_at})
        expected = cron_moments(expression, published, horizon)
        stray = sorted(now_made - set(expected))
        if stray:
            yield f"definition {definition_id}: runs at {stray[:3]} are no occurrence of {expression!r}"
        latest = max(now_made, default=published)
        gap = [m for m in expected if m < latest and m not in now_made]
        if gap:
            yield (
                f"definition {definition_id}: {len(gap)} occurrences before {latest} are neither a "
                f"run nor missed, the first {gap[0]}"
            )
        due = [m for m in expected if m <= ticked_at and m not in now_made]
        if due and now_made == then_made:
            yield (
                f"definition {definition_id}: the tick at {ticked_at} left {len(due)} due occurrences "
                f"uncreated (the first {due[0]}) and created none"
            )


def _scheduled(snapshot: Snapshot, definition_id: int) -> set[dt.datetime]:
    return {
        r["scheduled_for"]
        for r in snapshot.runs.values()
        if r["definition_id"] == definition_id and r["started_by"] == "schedule"
    }
