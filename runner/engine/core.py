"""What every part of the runner shares: its settings, the tick's report, the typed answers a
part gives the loop that drives a run, and the run-health helpers more than one stage needs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.history import RunDegraded, RunEnding, RunRecovered, record
from runner.lifecycle import move_run
from runner.records import RunRecord, StepRecord
from runner.registry import Envelope
from runner.sql import run_health as health_sql
from runner.states import Health, OnFailure, RunStatus

log = logging.getLogger("runner.engine")

MAX_ATTEMPTS = 3
RETRY_SECONDS = 30.0


@dataclass(frozen=True)
class RunnerSettings:
    max_attempts: int = MAX_ATTEMPTS
    retry_seconds: float = RETRY_SECONDS
    # How long a run lease lasts before another runner may take the run over. Renewed while a
    # tick works on the run, so it only matters when the holder died.
    run_lease_seconds: float = 60.0
    # How long a run's lease outlasts the lease of the step its holder claims (the holder settles
    # the step, then claims the next or renews): None is ``run_lease_seconds``. What a dead
    # holder's runs wait past its step's lease, so the serving bot keeps it short.
    run_lease_after_step_seconds: float | None = None
    # A step's lease is its action's budget plus this margin.
    step_lease_margin_seconds: float = 15.0
    # The most steps one run advances in one tick, so one long event cannot starve the others.
    steps_per_tick: int = 25

    @property
    def after_step(self) -> dt.timedelta:
        after = self.run_lease_after_step_seconds
        return dt.timedelta(seconds=self.run_lease_seconds if after is None else after)

    # How many runs one tick advances at the same time (fan-out: 500 announcements at Discord's
    # 50 per second need several in flight at once; far more than that only makes every run wait
    # its turn for the database, on SQLite's one connection above all). Measured: bench/fanout.
    concurrent_runs: int = 16
    due_batch: int = 1000
    lookahead_seconds: float = 24 * 3600
    # How far ahead the Discord mirror lists occurrences (the bot sets it from its config), and
    # whether an event that says nothing is mirrored: a mirrored definition's runs are created
    # at least this far ahead, so the mirror has runs to list.
    listing_horizon_seconds: float = 0.0
    list_by_default: bool = False
    lookback_seconds: float = 7 * 24 * 3600
    # A run waiting on a concurrency key is woken when the holder ends. The recheck bounds the
    # one race that wake can miss (blocked by a holder that ended a moment before the mark was
    # written), so keep it short; blocked runs are few.
    blocked_recheck_seconds: float = 10.0
    # A run whose next step falls due within this many seconds keeps its lease and is resumed
    # in process at that instant, instead of being given back for a tick to find (0: never; the
    # serving front ends turn it on, a runner ticked by hand keeps it off). Bounded well below
    # the lease, so the lease that covers the wait is renewed at most once.
    hold_in_process_seconds: float = 0.0
    # The tick's housekeeping (reclaim, stalls, occurrences, missed runs) runs when this long
    # has passed since it last ran; the ticks in between (a wake, a nudge) only advance what is
    # due, so a due step waits for one query, not five. 0: every tick (a runner ticked by hand).
    housekeeping_seconds: float = 0.0
    # Waits in rehearsal runs pass this many times faster (staff watch an event play out).
    rehearsal_speed: float = 1.0
    # A run in progress is ``stalled`` when it is this far past its wake time with no live lease
    # (nobody is advancing it: every runner is down, wedged or too far behind) ...
    stall_after_seconds: float = 600.0
    # ... or when the reclaim hands one of its steps back this many times: its runner keeps
    # dying on it (a crash loop; with the defaults, the next death spends the last attempt).
    stall_reclaims: int = 2
    # Retention: the run log, steps and bookkeeping rows of runs that ended longer ago than
    # this are pruned by the housekeeping, at most ``retention_batch`` rows per statement and a
    # few statements per pass (``engine.retention``). 0: keep everything (a runner ticked by
    # hand; the bot sets it from its config, 30 days unless told otherwise).
    keep_run_log_seconds: float = 0.0
    retention_batch: int = 500
    # The lowest action risk whose steps wait for a staff approval before they run
    # (``runner.approvals``): ``destructive``, ``moderate`` or ``never``. ``never`` for a runner
    # ticked by hand; the bot and the rehearsal set it from their config (``destructive`` unless
    # told otherwise).
    approve_from: str = "never"


SERVING_RUN_LEASE_SECONDS = 5.0
SERVING_STEP_LEASE_MARGIN_SECONDS = 3.0
SERVING_RUN_LEASE_AFTER_STEP_SECONDS = 1.0


def serving_settings(interval: float, **overrides: Any) -> RunnerSettings:
    """The settings of a runner a serving loop ticks every ``interval`` seconds (the bot, the
    benchmarks' real loop): housekeeping once per interval, the ticks between only advance what
    is due, and a wait of up to 30 s is slept through in process by the runner holding the run."""
    values: dict[str, Any] = {
        "hold_in_process_seconds": 30.0,
        "housekeeping_seconds": interval,
        # A serving process that dies hands its runs over within 20 s (issue 13): a run lease of
        # 5 s (renewed at every claim, and for a wait held in process, so only a dead holder
        # lets it run out) and a 3 s margin on a step's lease (``claims.still_leased`` stretches a lease
        # that a slow COMMIT left short, so the margin need only cover clocks and scheduling).
        "run_lease_seconds": SERVING_RUN_LEASE_SECONDS,
        "step_lease_margin_seconds": SERVING_STEP_LEASE_MARGIN_SECONDS,
        # The run's lease ends 1 s after its step's, not a whole run lease later; a dead holder's
        # run does not wait for it (the reclaim that hands its step back drops it), so a takeover
        # is the step's lease, 13 s, and the survivor's tick at its end; 14 s if the holder died
        # between a step's settle and the lease write of a wait held in process (issue 26 item 6).
        "run_lease_after_step_seconds": SERVING_RUN_LEASE_AFTER_STEP_SECONDS,
    }
    values.update(overrides)
    return RunnerSettings(**values)


@dataclass
class TickReport:
    reclaimed: int = 0
    gave_up: int = 0
    materialised: int = 0
    missed: int = 0
    stalled: int = 0
    # Rows retention deleted this tick.
    pruned: int = 0
    runs_advanced: int = 0
    steps_dispatched: int = 0
    errors: list[str] = field(default_factory=list)

    def absorb(self, part: TickReport) -> None:
        """Add what one stage did to the tick's report."""
        for each in dataclasses.fields(self):
            if each.name == "errors":
                self.errors.extend(part.errors)
            else:
                setattr(self, each.name, getattr(self, each.name) + getattr(part, each.name))


# What one stage of a tick did: the same counters as the tick's report, absorbed into it.
StageResult = TickReport


class Go(enum.Enum):
    """Carry on driving the run."""

    # The next open step of the phase, from the list already read.
    NEXT = "next"
    # The same, and the settle's transaction already claimed it: perform it at once.
    NEXT_CLAIMED = "next, claimed"
    # The settle's transaction also entered the next phase: read its steps (the run is known).
    CROSSED = "crossed"
    # The settle's transaction also completed the run (and so let its lease go).
    ENDED = "ended"
    # Read the run and its open steps again first (a hold moved a due date, a claim was lost,
    # a phase was crossed).
    REREAD = "reread"


@dataclass(frozen=True)
class Stop:
    """This run's turn is over; the tick should look at it again at ``wake`` (never, if None:
    parked, paused or ended, and a control or a holder's end will wake it)."""

    wake: dt.datetime | None = None


# What a step or a phase boundary tells the loop driving the run.
Verdict = Go | Stop


# Told about a step that answered "wait for a human" (a GM cue) after its run had ended: the
# run id, the step id, what the action answered (where the cue went) and why it is closed.
CloseParked = Callable[[int, int, dict[str, Any] | None, RunEnding], Awaitable[None]]


@dataclass(frozen=True)
class Orphaned:
    """A parked answer came back for a run that ended meanwhile; the step is cancelled and the
    message it posted must be closed once the transaction is committed."""

    run_id: int
    step_id: int
    output: dict[str, Any] | None
    ended: RunEnding


@dataclass
class Lease:
    run_id: int
    until: dt.datetime
    nudges_seen: int
    # The lease each step claim of this drive wrote, by step id: read (``claims.still_leased``) only
    # once the claim's COMMIT returned, to check the lease still covers the action's budget.
    claimed: dict[int, dt.datetime] = field(default_factory=dict)


@dataclass(frozen=True)
class DriveOutcome:
    """What a drive of a leased run decided, for whoever gives the lease back or holds it."""

    # When the run next needs a tick (never, if None: parked, paused or ended).
    wake: dt.datetime | None = None
    # The run ended under the lease: the terminal move already let the lease go.
    ended: bool = False
    # What the drive knew when it stopped at a step not yet due (the run, its open steps): a
    # drive that resumes at that moment under the same lease starts from it.
    known: tuple[RunRecord, list[StepRecord]] | None = None


@dataclass(frozen=True)
class RunKey:
    """An error memo key: a run that failed to advance."""

    run_id: int


@dataclass(frozen=True)
class DefinitionKey:
    """An error memo key: a definition whose occurrences could not be worked out."""

    definition_id: int


class ErrorMemo:
    """The last error of each run or definition, only for not repeating a log line; nothing the
    runner decides depends on it."""

    def __init__(self) -> None:
        self._last: dict[RunKey | DefinitionKey, str] = {}

    def first_time(self, key: RunKey | DefinitionKey, exc: BaseException) -> bool:
        """Log an error once, not on every tick it repeats (until it changes or clears)."""
        text = f"{type(exc).__name__}: {exc}"
        if self._last.get(key) == text:
            return False
        self._last[key] = text
        return True

    def clear(self, key: RunKey | DefinitionKey) -> None:
        self._last.pop(key, None)


async def recover(conn: AsyncConnection, run_id: int, now: dt.datetime) -> None:
    """The run moved (a step settled, a phase or status changed): a stall is over."""
    restored = await health_sql.recover(conn, run_id, now)
    if restored is not None:
        await record(conn, run_id, RunRecovered(Health(restored)), now)


async def degrade(conn: AsyncConnection, run_id: int, now: dt.datetime, reason: str) -> None:
    if await health_sql.degrade(conn, run_id, now):
        await record(conn, run_id, RunDegraded(reason[:300]), now)


async def apply_on_failure(
    conn: AsyncConnection, run_id: int, step: StepRecord, error: str, now: dt.datetime
) -> bool:
    """The step is written failed; now its ``on_failure`` acts on the run. True if the run
    stopped (paused or failed)."""
    await degrade(conn, run_id, now, f"step {step.id} failed: {error}")
    message = f"step {step.id} ({step.action_id}) failed: {error}"
    if step.on_failure is OnFailure.SKIP:
        return False
    if step.on_failure is OnFailure.PAUSE:
        froms: tuple[RunStatus, ...] = (RunStatus.RUNNING,)
        to, cancel_open = RunStatus.PAUSED, False
    else:
        froms, to, cancel_open = (RunStatus.RUNNING, RunStatus.PAUSED), RunStatus.FAILED, True
    await move_run(
        conn,
        run_id,
        froms,
        to,
        now,
        step_id=step.id,
        last_error=message,
        cancel_open=cancel_open,
        reason="step failed",
        error=error,
    )
    return True


def step_envelope(run: RunRecord, step: StepRecord) -> Envelope:
    """What an action is handed to perform ``step`` of ``run`` (a phase's step or a reminder):
    the step's own idempotency key, so every attempt sends the same nonce."""
    return Envelope(
        actor=run.started_by,
        idempotency_key=step.idempotency_key,
        params=dict(step.params or {}),
        run_id=run.id,
        scope=run.scope,
        step_id=step.id,
        verify=False,
    )
