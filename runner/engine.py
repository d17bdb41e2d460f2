"""The runner: one ``tick`` that moves every due run as far as it can.

One tick, in order:

1. **Reclaim** steps whose runner died: give up on spent ones first, then hand the rest back,
   never touching ``attempts`` and never touching a parked cue. Stale run leases are dropped.
2. **Materialise** upcoming occurrences of once/cron definitions (the occurrence key makes a
   second insert a no-op) and mark **missed** those past their own definition's grace window.
3. **Advance** each due run, concurrently (one slow action must not hold up the others): take
   it by compare-and-set, walk its current phase step by step (each step claim re-checks that
   the run is still ``running``, so a pause pressed mid-batch stops the batch), cross phase
   boundaries, complete it, and give the lease back with the time it next needs a tick.

The engine knows nothing of Discord; actions reach the outside world through the delivery
interface they were built with.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import catalog
from runner.clock import Clock, SystemClock
from runner.db import DATABASE_ERRORS, retry_on_conflict
from runner.definitions import EventDefinition, ManualSchedule, PhaseDefinition
from runner.dispatch import Classified, perform
from runner.errors import UnreadableDefinition
from runner.history import (
    PhaseCompleted,
    PhaseStarted,
    RunBlocked,
    RunDegraded,
    RunRecovered,
    RunStalled,
    StallReason,
    StepCancelled,
    StepDone,
    StepFailed,
    StepParked,
    StepReclaimed,
    StepRetry,
    record,
)
from runner.lifecycle import Claim, enter_phase, move_run
from runner.registry import ActionRegistry, Envelope
from runner.schedule import MAX_OCCURRENCES_PER_PASS, occurrences
from runner.sql import definitions as definitions_sql
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import Health, RunStatus

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
RETRY_SECONDS = 30.0


def default_owner() -> str:
    """Who holds a lease: host, process and a random tag, so two runners never share an id."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class RunnerSettings:
    max_attempts: int = MAX_ATTEMPTS
    retry_seconds: float = RETRY_SECONDS
    # How long a run lease lasts before another runner may take the run over. Renewed while a
    # tick works on the run, so it only matters when the holder died.
    run_lease_seconds: float = 60.0
    # A step's lease is its action's budget plus this margin.
    step_lease_margin_seconds: float = 15.0
    # The most steps one run advances in one tick, so one long event cannot starve the others.
    steps_per_tick: int = 25
    # How many runs one tick advances at the same time (fan-out: 500 announcements at Discord's
    # 50 per second need several in flight at once; far more than that only makes every run wait
    # its turn for the database, on SQLite's one connection above all). Measured: bench/fanout.
    concurrent_runs: int = 16
    due_batch: int = 1000
    lookahead_seconds: float = 24 * 3600
    lookback_seconds: float = 7 * 24 * 3600
    # A run waiting on a concurrency key is woken when the holder ends. The recheck bounds the
    # one race that wake can miss (blocked by a holder that ended a moment before the mark was
    # written), so keep it short; blocked runs are few.
    blocked_recheck_seconds: float = 10.0
    # Waits in rehearsal runs pass this many times faster (staff watch an event play out).
    rehearsal_speed: float = 1.0
    # A run in progress is ``stalled`` when it is this far past its wake time with no live lease
    # (nobody is advancing it: every runner is down, wedged or too far behind) ...
    stall_after_seconds: float = 600.0
    # ... or when the reclaim hands one of its steps back this many times: its runner keeps
    # dying on it (a crash loop; with the defaults, the next death spends the last attempt).
    stall_reclaims: int = 2


@dataclass
class TickReport:
    reclaimed: int = 0
    gave_up: int = 0
    materialised: int = 0
    missed: int = 0
    stalled: int = 0
    runs_advanced: int = 0
    steps_dispatched: int = 0
    errors: list[str] = field(default_factory=list)


class _Abandon(Exception):
    """Roll back the current transaction: a guard found the run changed underneath us."""


# Told about a step that answered "wait for a human" (a GM cue) after its run had ended: the
# run id, the step id, what the action answered (where the cue went) and why it is closed.
CloseParked = Callable[[int, int, dict[str, Any] | None, str], Awaitable[None]]


@dataclass(frozen=True)
class _Orphaned:
    """A parked answer came back for a run that ended meanwhile; the step is cancelled and the
    message it posted must be closed once the transaction is committed."""

    run_id: int
    step_id: int
    output: dict[str, Any] | None
    reason: str


@dataclass
class _Lease:
    run_id: int
    until: dt.datetime
    nudges_seen: int


class Runner:
    MAX_ATTEMPTS = MAX_ATTEMPTS
    RETRY_SECONDS = RETRY_SECONDS

    def __init__(
        self,
        engine: AsyncEngine,
        registry: ActionRegistry,
        *,
        clock: Clock | None = None,
        owner: str | None = None,
        settings: RunnerSettings | None = None,
        versions: catalog.VersionCache | None = None,
        close_parked: CloseParked | None = None,
    ) -> None:
        self.engine = engine
        self.close_parked = close_parked
        self.registry = registry
        self.clock = clock or SystemClock()
        self.owner = owner or default_owner()
        self.settings = settings or RunnerSettings()
        self.versions = versions or catalog.VersionCache()
        self._tick_lock = asyncio.Lock()
        # Only for not repeating a log line; nothing the runner decides depends on it.
        self._last_error: dict[int, str] = {}

    # ── The tick ──────────────────────────────────────────────────────────

    async def tick(self) -> TickReport:
        """Advance everything that is due. Database errors in the housekeeping stages propagate
        (the caller backs off); one run's failure is logged and never stops the others."""
        async with self._tick_lock:
            report = TickReport()
            await self._reclaim(report)
            await self._mark_stalled(report)
            await self._materialise(report)
            await self._mark_missed(report)
            await self._advance_due(report)
            return report

    async def next_wake(self) -> dt.datetime | None:
        async with self.engine.connect() as conn:
            return await runs_sql.next_wake(conn)

    # ── 1. Reclaim ────────────────────────────────────────────────────────

    async def _reclaim(self, report: TickReport) -> None:
        outcome = await self._reclaim_transaction()
        report.reclaimed += outcome.reclaimed
        report.gave_up += outcome.failed

    @retry_on_conflict
    async def _reclaim_transaction(self) -> steps_sql.Reclaimed:
        now = self.clock.now()
        outcome = steps_sql.Reclaimed(0, 0)
        async with self.engine.begin() as conn:
            stale = await steps_sql.stale(conn, now)
            if stale:
                outcome = await steps_sql.reclaim_stale(
                    conn, now, self.settings.max_attempts, step_ids=[int(s["id"]) for s in stale]
                )
                await self._after_reclaim(conn, stale, now)
            await runs_sql.reclaim_stale(conn, now)
        return outcome

    async def _after_reclaim(self, conn: AsyncConnection, stale: Any, now: dt.datetime) -> None:
        for row in stale:
            step = await steps_sql.get(conn, int(row["id"]))
            if step is None:
                continue
            run_id = int(step["run_id"])
            if step["status"] == "failed" and step["last_error"] == steps_sql.GAVE_UP:
                await record(conn, run_id, StepFailed(steps_sql.GAVE_UP), now, step_id=int(step["id"]))
                await self._recover(conn, run_id, now)
                await self._apply_on_failure(conn, run_id, step, steps_sql.GAVE_UP, now)
            elif step["status"] == "cancelled":
                await record(conn, run_id, StepCancelled(reason="run ended"), now, step_id=int(step["id"]))
            elif step["status"] == "pending":
                await record(conn, run_id, StepReclaimed(int(step["attempts"])), now, step_id=int(step["id"]))
                reclaims = await runs_sql.step_reclaims(conn, run_id, int(step["id"]))
                if reclaims >= self.settings.stall_reclaims:
                    await self._stall(
                        conn,
                        run_id,
                        now,
                        functools.partial(
                            RunStalled, StallReason.RECLAIMED, step_id=int(step["id"]), reclaims=reclaims
                        ),
                    )
            await runs_sql.nudge(conn, run_id, now)

    # ── Stalled ───────────────────────────────────────────────────────────

    async def _mark_stalled(self, report: TickReport) -> None:
        report.stalled += await self._mark_stalled_transaction()

    @retry_on_conflict
    async def _mark_stalled_transaction(self) -> int:
        """Runs far past their wake that nobody holds. The advance that follows in this same tick
        usually moves them on (and ``_recover`` clears it); the two log lines then say how long
        the run stood still, which is what staff want to know after an outage."""
        now = self.clock.now()
        before = now - dt.timedelta(seconds=self.settings.stall_after_seconds)
        stalled = 0
        async with self.engine.begin() as conn:
            for row in await runs_sql.find_overdue(conn, now, before):
                overdue = (now - row["wake_at"]).total_seconds()
                event = functools.partial(
                    RunStalled, StallReason.OVERDUE, wake_at=row["wake_at"], overdue_seconds=overdue
                )
                if await self._stall(conn, int(row["id"]), now, event, health=Health(row["health"])):
                    stalled += 1
        return stalled

    async def _stall(
        self,
        conn: AsyncConnection,
        run_id: int,
        now: dt.datetime,
        event: Callable[[Health], RunStalled],
        *,
        health: Health | None = None,
    ) -> bool:
        """Mark the run stalled and log ``run.stalled`` once (with the health it had)."""
        if health is None:
            run = await runs_sql.get(conn, run_id)
            if run is None:
                return False
            health = Health(run["health"])
        if health is Health.STALLED or not await runs_sql.stall(conn, run_id, health, now):
            return False
        await record(conn, run_id, event(health), now)
        return True

    async def _recover(self, conn: AsyncConnection, run_id: int, now: dt.datetime) -> None:
        """The run moved (a step settled, a phase or status changed): a stall is over."""
        restored = await runs_sql.recover(conn, run_id, now)
        if restored is not None:
            await record(conn, run_id, RunRecovered(Health(restored)), now)

    # ── 2. Occurrences ────────────────────────────────────────────────────

    async def _materialise(self, report: TickReport) -> None:
        now = self.clock.now()
        until = now + dt.timedelta(seconds=self.settings.lookahead_seconds)
        refresh_before = now + dt.timedelta(seconds=self.settings.lookahead_seconds / 2)
        async with self.engine.connect() as conn:
            rows = await definitions_sql.list_all(conn)
        for row in rows:
            if row["materialised_until"] is not None and row["materialised_until"] > refresh_before:
                continue
            try:
                report.materialised += await self._materialise_definition(row, now, until)
            except DATABASE_ERRORS:
                raise
            except Exception as exc:
                # One definition that cannot be worked out must not stop the tick for the rest.
                report.errors.append(f"definition {row['key']}: {exc!r}")
                if self._first_time(-int(row["id"]), exc):
                    log.exception("definition %s: cannot materialise its occurrences", row["key"])

    @retry_on_conflict
    async def _materialise_definition(self, row: Any, now: dt.datetime, until: dt.datetime) -> int:
        """Create the runs of every occurrence in ``(materialised_until, until]``, each under the
        version that was in force at its moment, at most ``MAX_OCCURRENCES_PER_PASS`` at a time;
        the bookkeeping advances only as far as the pass really reached."""
        created = 0
        definition_id = int(row["id"])
        tick = dt.timedelta(microseconds=1)
        async with self.engine.begin() as conn:
            history = await definitions_sql.version_history(conn, definition_id)
            # ``occurrences`` works out ``(after, until]``: starting a tick before a publishing
            # instant keeps an occurrence at that very instant, which the open bound dropped.
            after = row["materialised_until"] or (history[0]["published_at"] - tick)
            after = max(after, now - dt.timedelta(seconds=self.settings.lookback_seconds) - tick)
            remaining = MAX_OCCURRENCES_PER_PASS
            reached = until
            for index, version in enumerate(history):
                # A version is in force from its publishing instant until the next one's.
                lower = max(after, version["published_at"] - tick)
                upper = until if index + 1 == len(history) else history[index + 1]["published_at"] - tick
                upper = min(upper, until)
                if lower >= upper:
                    continue
                in_force = await self._version_in_force(conn, row, int(version["id"]))
                if in_force is None or isinstance(in_force.definition.schedule, ManualSchedule):
                    continue
                taken = await runs_sql.occurrences_taken(conn, definition_id, lower, upper)
                scopes = in_force.definition.run_scopes()
                for moment in self._moments(in_force.definition, lower, upper):
                    missing = [scope for scope in scopes if (moment, scope) not in taken]
                    for scope in missing:
                        if await catalog.create_run(conn, in_force, scope, moment, now, actor="schedule"):
                            created += 1
                    # Only occurrences this pass really created count towards its budget: after a
                    # publish, walking the ones the old version already created costs nothing.
                    remaining -= 1 if missing else 0
                    if remaining == 0:
                        # The pass stopped at its cap, not at ``until``: only what it reached is
                        # done, and the next pass carries on from there. Recording ``until`` here
                        # silently dropped every occurrence between the cap and the lookahead.
                        reached = moment
                        break
                if remaining == 0:
                    break
            await definitions_sql.set_materialised_until(conn, definition_id, reached)
        return created

    @staticmethod
    def _moments(
        definition: EventDefinition, after: dt.datetime, until: dt.datetime
    ) -> Iterator[dt.datetime]:
        """Every occurrence in ``(after, until]``, however many: ``occurrences`` hands them out
        ``MAX_OCCURRENCES_PER_PASS`` at a time."""
        while True:
            chunk = list(occurrences(definition, after, until))
            yield from chunk
            if len(chunk) < MAX_OCCURRENCES_PER_PASS:
                return
            after = chunk[-1]

    async def _version_in_force(
        self, conn: AsyncConnection, row: Any, version_id: int
    ) -> catalog.CurrentDefinition | None:
        """The definition as it was published in ``version_id``. An older version that today's
        rules cannot read is passed over (logged once): the current one must still be worked out.
        The current version's problems propagate, as before."""
        try:
            definition = await self.versions.get(conn, version_id)
        except UnreadableDefinition as exc:
            if version_id == int(row["current_version_id"]):
                raise
            if self._first_time(-int(row["id"]), exc):
                log.warning("definition %s: version %s cannot be read: %s", row["key"], version_id, exc)
            return None
        return catalog.CurrentDefinition(int(row["id"]), version_id, definition)

    async def _mark_missed(self, report: TickReport) -> None:
        report.missed += await self._mark_missed_transaction()

    @retry_on_conflict
    async def _mark_missed_transaction(self) -> int:
        now = self.clock.now()
        missed = 0
        async with self.engine.begin() as conn:
            for run_id in await runs_sql.find_missed(conn, now):
                run = await runs_sql.get(conn, run_id)
                if run is None:
                    continue
                if await move_run(
                    conn,
                    run_id,
                    RunStatus.SCHEDULED,
                    RunStatus.MISSED,
                    now,
                    cancel_open=True,
                    last_error="missed: not started within its grace window",
                    scheduled_for=run["scheduled_for"],
                ):
                    missed += 1
        return missed

    # ── 3. Advance ────────────────────────────────────────────────────────

    async def _advance_due(self, report: TickReport) -> None:
        now = self.clock.now()
        async with self.engine.connect() as conn:
            due = await runs_sql.find_due(conn, now, self.settings.due_batch)
        if not due:
            return
        gate = asyncio.Semaphore(self.settings.concurrent_runs)

        async def one(row: Any) -> None:
            run_id = int(row["id"])
            async with gate:
                try:
                    if await self._advance(row, report):
                        report.runs_advanced += 1
                    self._last_error.pop(run_id, None)
                except DATABASE_ERRORS as exc:
                    # A database blip mid-run: the lease expires and the next tick carries on.
                    report.errors.append(f"run {run_id}: {exc}")
                    if self._first_time(run_id, exc):
                        log.warning(
                            "run %s: database error while advancing: %s",
                            run_id,
                            exc,
                            extra={"run_id": run_id},
                        )
                except Exception as exc:
                    report.errors.append(f"run {run_id}: {exc!r}")
                    if self._first_time(run_id, exc):
                        log.exception(
                            "run %s: unexpected error while advancing", run_id, extra={"run_id": run_id}
                        )

        await asyncio.gather(*(one(row) for row in due))

    def _first_time(self, run_id: int, exc: BaseException) -> bool:
        """Log an error once, not on every tick it repeats (until it changes or clears). Runs are
        keyed by id, definitions by their negated id."""
        text = f"{type(exc).__name__}: {exc}"
        if self._last_error.get(run_id) == text:
            return False
        self._last_error[run_id] = text
        return True

    async def _advance(self, row: Any, report: TickReport) -> bool:
        lease = await self._take(row)
        if lease is None:
            return False
        wake: dt.datetime | None = None
        try:
            wake = await self._drive(lease, report)
        except BaseException:
            # Look again after the backoff rather than leave the run dormant with no wake time.
            wake = self.clock.now() + dt.timedelta(seconds=self.settings.retry_seconds)
            raise
        finally:
            await self._release(lease, wake)
        return True

    @retry_on_conflict
    async def _release(self, lease: _Lease, wake: dt.datetime | None) -> None:
        async with self.engine.begin() as conn:
            await runs_sql.release_claim(
                conn, lease.run_id, self.owner, wake_at=wake, nudges_seen=lease.nudges_seen
            )

    @retry_on_conflict
    async def _take(self, row: Any) -> _Lease | None:
        """Take the run's lease: ``scheduled -> starting`` (with the concurrency key) or a free
        lease on a run in flight. ``None`` when someone else has it or the key is held."""
        run_id = int(row["id"])
        now = self.clock.now()
        until = now + dt.timedelta(seconds=self.settings.run_lease_seconds)
        async with self.engine.begin() as conn:
            if row["status"] == "scheduled":
                holder = await runs_sql.concurrency_holder(conn, row["concurrency_key"], run_id)
                if holder is not None:
                    await self._blocked(conn, run_id, row["concurrency_key"], int(holder["id"]), now)
                    return None
                # No savepoint: a refused statement does not abort the transaction on either
                # backend, and a deadlock (which does) would take the savepoint with it.
                try:
                    won = await move_run(
                        conn,
                        run_id,
                        RunStatus.SCHEDULED,
                        RunStatus.STARTING,
                        now,
                        claim=Claim(self.owner, until),
                    )
                except sa_exc.IntegrityError:
                    # Another runner started a holder of the same key between our check and our
                    # claim; the slot's unique index refused us.
                    holder = await runs_sql.concurrency_holder(conn, row["concurrency_key"], run_id)
                    if holder is not None:
                        await self._blocked(conn, run_id, row["concurrency_key"], int(holder["id"]), now)
                    return None
                if not won:
                    return None
            elif not await runs_sql.claim_tick(conn, run_id, self.owner, until, now):
                return None
            run = await runs_sql.get(conn, run_id)
        assert run is not None
        return _Lease(run_id, until, int(run["nudges"]))

    async def _blocked(
        self, conn: AsyncConnection, run_id: int, key: str, holder_id: int, now: dt.datetime
    ) -> None:
        error = f"waiting: concurrency key {key!r} is held by run {holder_id}"
        recheck = now + dt.timedelta(seconds=self.settings.blocked_recheck_seconds)
        if await runs_sql.mark_blocked(conn, run_id, holder_id, error, now, recheck):
            await record(conn, run_id, RunBlocked(key, holder_id), now)

    async def _drive(self, lease: _Lease, report: TickReport) -> dt.datetime | None:
        """Move one leased run as far as it goes; answer when it next needs a tick."""
        run_id = lease.run_id
        dispatched = 0
        while True:
            now = self.clock.now()
            async with self.engine.connect() as conn:
                run = await runs_sql.get(conn, run_id)
                if run is None:
                    return None
                definition = await self.versions.get(conn, int(run["version_id"]))
            status = run["status"]
            if status == "starting":
                if not await self._enter_first_phase(run, definition, now):
                    return None
                continue
            if status == "ending":
                await self._complete(run_id, now, recover=run["health"] == "stalled")
                return None
            if status != "running":
                return None
            phase = run["current_phase"] or definition.phases[0].key
            async with self.engine.connect() as conn:
                open_steps = await steps_sql.open_steps(conn, run_id, phase)
            if not open_steps:
                wake = await self._end_phase(run, definition, phase, now)
                if wake is _CONTINUE:
                    continue
                return wake  # type: ignore[return-value]
            for step in open_steps:
                now = self.clock.now()
                if step["status"] == "running":
                    # Parked (NULL lease): only a human moves it. Leased: its runner is
                    # dispatching it, or died and the reclaim will hand it back.
                    return step["claim_expires_at"]
                if step["due_at"] is not None and step["due_at"] > now:
                    return step["due_at"]
                if dispatched >= self.settings.steps_per_tick:
                    return now
                verdict = await self._run_step(lease, run, definition, step, report)
                dispatched += 1
                if verdict is _NEXT:
                    continue
                if verdict is _REREAD:
                    break
                return verdict  # type: ignore[return-value]

    @retry_on_conflict
    async def _enter_first_phase(self, run: Any, definition: EventDefinition, now: dt.datetime) -> bool:
        # Phase one's steps were created with the run (``catalog.create_run``). Re-inserting them
        # here took a shared lock on the run row (the foreign-key check) before the transition
        # wanted an exclusive one: a deadlock with another runner's claim of the same run.
        first = definition.phases[0]
        async with self.engine.begin() as conn:
            run_id = int(run["id"])
            if not await move_run(conn, run_id, RunStatus.STARTING, RunStatus.RUNNING, now, phase=first.key):
                return False
            if run["health"] == "stalled":
                await self._recover(conn, run_id, now)
            await record(conn, run_id, PhaseStarted(first.key), now)
        return True

    async def _end_phase(
        self, run: Any, definition: EventDefinition, phase: str, now: dt.datetime
    ) -> dt.datetime | object | None:
        run_id = int(run["id"])
        following = definition.next_phase(phase)
        if following is None and run["held_until"] is not None and run["held_until"] > now:
            # A wait at the very end holds the end of the event too.
            return run["held_until"]
        try:
            await self._cross_phase_boundary(run, phase, following, now)
        except _Abandon:
            return None
        if following is None:
            await self._complete(run_id, now)
            return None
        return _CONTINUE

    @retry_on_conflict
    async def _cross_phase_boundary(
        self, run: Any, phase: str, following: PhaseDefinition | None, now: dt.datetime
    ) -> None:
        """Close ``phase`` and enter ``following`` (or ``ending``), in one transaction; raises
        ``_Abandon`` (rolling it back) when the run stopped being ``running`` underneath us."""
        run_id = int(run["id"])
        async with self.engine.begin() as conn:
            if run["health"] == "stalled":
                await self._recover(conn, run_id, now)
            await record(conn, run_id, PhaseCompleted(phase), now)
            if following is None:
                if not await move_run(conn, run_id, RunStatus.RUNNING, RunStatus.ENDING, now):
                    raise _Abandon
            else:
                # running -> running: the guard is "still running", which is the answer wanted.
                # The run row is locked first, before the step inserts' foreign-key checks take a
                # shared lock on it: the other order deadlocks with a competing runner.
                if not await enter_phase(conn, run_id, following.key, now):
                    raise _Abandon
                await steps_sql.materialise_phase(
                    conn,
                    run_id,
                    following.key,
                    catalog.phase_step_specs(following),
                    now,
                    first_due_at=run["held_until"],
                )
                await runs_sql.take_phase_hold(conn, run_id)

    @retry_on_conflict
    async def _complete(self, run_id: int, now: dt.datetime, *, recover: bool = False) -> None:
        async with self.engine.begin() as conn:
            if recover:
                await self._recover(conn, run_id, now)
            await move_run(conn, run_id, RunStatus.ENDING, RunStatus.COMPLETED, now)

    # ── One step ──────────────────────────────────────────────────────────

    async def _run_step(
        self, lease: _Lease, run: Any, definition: EventDefinition, step: Any, report: TickReport
    ) -> object:
        run_id = lease.run_id
        step_id = int(step["id"])
        if not await self._claim_step(lease, step):
            # Paused or cancelled underneath us, or a human settled this step: look again.
            return _REREAD
        report.steps_dispatched += 1
        envelope = Envelope(
            actor=run["started_by"],
            idempotency_key=step["idempotency_key"],
            params=dict(step["params"] or {}),
            run_id=run_id,
            scope=run["scope"],
            step_id=step_id,
            verify=False,
        )
        outcome = await perform(self.registry, envelope, step["action_id"])
        attempts = int(step["attempts"]) + 1  # the row was read before our claim counted this one
        verdict = await self._settle(run, step, attempts, outcome)
        if isinstance(verdict, _Orphaned):
            await self._close_parked(verdict)
            return _REREAD
        return verdict

    async def _close_parked(self, orphan: _Orphaned) -> None:
        """Close what a parked answer posted for a run that had already ended (a cue's buttons).
        The step is cancelled whatever the front end manages: a failure here is logged only."""
        ids = {"run_id": orphan.run_id, "step_id": orphan.step_id}
        if self.close_parked is None:
            log.warning(
                "run %s step %s: cancelled after its run ended; nothing closes what it posted",
                orphan.run_id,
                orphan.step_id,
                extra=ids,
            )
            return
        try:
            await self.close_parked(orphan.run_id, orphan.step_id, orphan.output, orphan.reason)
        except Exception:
            log.exception(
                "run %s step %s: could not close what the step posted",
                orphan.run_id,
                orphan.step_id,
                extra=ids,
            )

    @retry_on_conflict
    async def _claim_step(self, lease: _Lease, step: Any) -> bool:
        """Lease the step (renewing the run's lease first when the step could outlast it)."""
        action = self.registry.get(step["action_id"])
        budget = (action.budget_ms if action else 1000) / 1000
        now = self.clock.now()
        margin = dt.timedelta(seconds=self.settings.step_lease_margin_seconds)
        step_lease = now + dt.timedelta(seconds=budget) + margin
        async with self.engine.begin() as conn:
            if lease.until < step_lease + margin:
                lease.until = step_lease + dt.timedelta(seconds=self.settings.run_lease_seconds)
                await runs_sql.renew_claim(conn, lease.run_id, self.owner, lease.until)
            return await steps_sql.claim(
                conn,
                int(step["id"]),
                run_id=lease.run_id,
                owner=self.owner,
                lease_until=step_lease,
                now=now,
                action_version=action.version if action else None,
            )

    @retry_on_conflict
    async def _settle(self, run: Any, step: Any, attempts: int, outcome: Classified) -> object:
        run_id = int(run["id"])
        step_id = int(step["id"])
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if run["health"] == "stalled":
                # Before anything this settle degrades: ``degrade`` only moves ``ok``.
                await self._recover(conn, run_id, now)
            if outcome.outcome == "done":
                if not await steps_sql.finish(conn, step_id, self.owner, "done", now, result=outcome.output):
                    return await self._settle_refused(conn, run_id, step, outcome, now)
                hold_until: dt.datetime | None = None
                if outcome.hold_seconds > 0:
                    hold = outcome.hold_seconds
                    if run["rehearsal"]:
                        hold /= self.settings.rehearsal_speed
                    hold_until = now + dt.timedelta(seconds=hold)
                    if not await steps_sql.hold_next(
                        conn, run_id, step["phase"], int(step["seq"]), hold_until
                    ):
                        if not await steps_sql.has_pending_after(
                            conn, run_id, step["phase"], int(step["seq"])
                        ):
                            await runs_sql.set_phase_hold(conn, run_id, hold_until)
                done = StepDone(step["action_id"], attempts, hold_until=hold_until)
                await record(conn, run_id, done, now, step_id=step_id)
                return _REREAD if outcome.hold_seconds > 0 else _NEXT
            if outcome.outcome == "parked":
                if not await steps_sql.park(conn, step_id, self.owner, now, result=outcome.output):
                    return await self._settle_refused(conn, run_id, step, outcome, now)
                await record(conn, run_id, StepParked(step["action_id"]), now, step_id=step_id)
                return None
            error = outcome.error or "failed"
            if outcome.outcome == "retry" and attempts < self.settings.max_attempts:
                due = now + dt.timedelta(seconds=self.settings.retry_seconds)
                if not await steps_sql.reschedule(conn, step_id, self.owner, due, error, now):
                    return await self._settle_refused(conn, run_id, step, outcome, now)
                await record(conn, run_id, StepRetry(attempts, error, due), now, step_id=step_id)
                await self._degrade(conn, run_id, now, f"step {step_id} is being retried: {error}")
                return due
            if outcome.outcome == "retry":
                error = f"gave up after {attempts} attempts: {error}"
            if not await steps_sql.finish(
                conn, step_id, self.owner, "failed", now, error=error, result=outcome.output
            ):
                return await self._settle_refused(conn, run_id, step, outcome, now)
            failed = StepFailed(error, action=step["action_id"], attempts=attempts)
            await record(conn, run_id, failed, now, step_id=step_id)
            stopped = await self._apply_on_failure(conn, run_id, step, error, now)
            return None if stopped else _NEXT

    async def _settle_refused(
        self, conn: AsyncConnection, run_id: int, step: Any, outcome: Classified, now: dt.datetime
    ) -> object:
        """Our settle statement matched nothing: either the step is no longer ours (the reclaim or
        a human took it) or its run ended while it was out. The second case cancels the step, so
        it cannot stay ``running`` on a dead run, and hands back what a parked answer posted."""
        step_id = int(step["id"])
        if not await steps_sql.cancel_on_ended_run(conn, step_id, self.owner, now, result=outcome.output):
            # Not ours any more: as before, a lost park stops this run's turn, the rest look again.
            return None if outcome.outcome == "parked" else _REREAD
        current = await runs_sql.get(conn, run_id)
        status = current["status"] if current is not None else "gone"
        cancelled = StepCancelled(action=step["action_id"], outcome=outcome.outcome, run_status=status)
        await record(conn, run_id, cancelled, now, step_id=step_id)
        if outcome.outcome != "parked":
            return _REREAD
        why = current["last_error"] if current is not None else None
        reason = f"the run was {status} while this was being posted" + (f" ({why})" if why else "")
        return _Orphaned(run_id, step_id, outcome.output, reason)

    async def _degrade(self, conn: AsyncConnection, run_id: int, now: dt.datetime, reason: str) -> None:
        if await runs_sql.degrade(conn, run_id, now):
            await record(conn, run_id, RunDegraded(reason[:300]), now)

    async def _apply_on_failure(
        self, conn: AsyncConnection, run_id: int, step: Any, error: str, now: dt.datetime
    ) -> bool:
        """The step is written failed; now its ``on_failure`` acts on the run. True if the run
        stopped (paused or failed)."""
        await self._degrade(conn, run_id, now, f"step {step['id']} failed: {error}")
        disposition = step["on_failure"]
        message = f"step {step['id']} ({step['action_id']}) failed: {error}"
        if disposition == "pause":
            await move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                RunStatus.PAUSED,
                now,
                step_id=int(step["id"]),
                last_error=message,
                reason="step failed",
                error=error,
            )
            return True
        if disposition == "abort_run":
            await move_run(
                conn,
                run_id,
                (RunStatus.RUNNING, RunStatus.PAUSED),
                RunStatus.FAILED,
                now,
                cancel_open=True,
                step_id=int(step["id"]),
                last_error=message,
                reason="step failed",
                error=error,
            )
            return True
        return False


_NEXT = object()
_REREAD = object()
_CONTINUE = object()
