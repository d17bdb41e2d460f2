"""The run and step state machines (../shared/DESIGN.md), readable in one file.

The statuses are ``StrEnum``s whose values are the stored strings, so a row's ``"running"`` and
``RunStatus.RUNNING`` compare equal and the schema's ENUM columns are built from these. The
transition tables are what ``lifecycle.move_run`` checks every run move against; the groups
below are the only place a set of statuses is spelled out.

The words that cross the runner's edges are here too, for the same reason: an action's answer
(``AnswerKey``, read into an ``ActionOutcome``), the controls a person presses (``Control``) and
a listing's ``pushed_status`` (``ListingStatus``). Nothing else in the product spells them as
strings (``tests/test_status_literals.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType


class RunStatus(enum.StrEnum):
    SCHEDULED = "scheduled"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    ENDING = "ending"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    MISSED = "missed"


class Health(enum.StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    STALLED = "stalled"


class StepStatus(enum.StrEnum):
    # The seeds' DDL also lists ``refused``; nothing ever wrote it, and migration 0003 dropped it.
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class OnFailure(enum.StrEnum):
    """What a failed step does to its run."""

    SKIP = "skip"
    PAUSE = "pause"
    ABORT_RUN = "abort_run"


class ActionOutcome(enum.StrEnum):
    """What an action's answer means to the runner (``dispatch.classify`` reads the seeds' dict
    protocol into one of these, at the action edge; nothing past it sees the dict)."""

    DONE = "done"
    # Waits for a human (a GM cue's confirm or skip).
    PARKED = "parked"
    # A transient failure: tried again while attempts are left.
    RETRY = "retry"
    TERMINAL = "terminal"


class AnswerKey(enum.StrEnum):
    """The keys of an action's answer, the seeds' dict protocol (§F), which
    ``dispatch.classify`` reads into an ``ActionOutcome``. The answer stays a plain dict (these
    members are its keys as they are spelled on the wire)::

        {"ok": True}                         done
        {"ok": True, "holdFor": 300}         done, and hold the next step for 300 s
        {"ok": True, "await": "human"}       parked: a cue waits for a GM's confirm or skip
        {"ok": False, "retry": False, ...}   terminal failure
        anything else                        transient failure (retried)

    A verify answers ``{"ok": True}`` or ``{"ok": False, "retry": False, "problems": [...]}``.
    """

    OK = "ok"
    RETRY = "retry"
    HOLD_FOR = "holdFor"
    AWAIT = "await"
    ERROR = "error"
    PROBLEMS = "problems"
    # Kept on the step (where a cue was posted, for one).
    OUTPUT = "output"
    # How to undo what the action did, for the run's cleanup ledger (``runner.engine.cleanup``): an
    # action declared ``reversible: automatic`` answers ``{"action": ..., "params": {...}}``.
    UNDO = "undo"
    # Written by ``dispatch`` itself for an action that outran its budget.
    TIMED_OUT = "__timedOut"


# The ``await`` of an answer that parks its step until a person settles it.
AWAIT_HUMAN = "human"


class Control(enum.StrEnum):
    """The controls, the moves a person makes on a run or a step (``runner.controls``); a run's
    status line records the one that moved it, and front ends say "cannot pause: …"."""

    START = "start"
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    RETRY = "retry"
    CONFIRM = "confirm"
    SKIP = "skip"
    APPROVE = "approve"


class ListingStatus(enum.StrEnum):
    """A run's listing (``event_run_listings.pushed_status``): the status of the Discord scheduled
    event last pushed for it, or what a publisher stored when no request was worth making."""

    SCHEDULED = "scheduled"
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    # The event was deleted in Discord: never recreate it.
    GONE = "gone"
    # The occurrence was over before it could be listed.
    SKIPPED = "skipped"


_R = RunStatus

RUN_TERMINAL: frozenset[RunStatus] = frozenset({_R.COMPLETED, _R.CANCELLED, _R.FAILED, _R.MISSED})
RUN_IN_FLIGHT: frozenset[RunStatus] = frozenset(RunStatus) - RUN_TERMINAL
# Statuses the tick advances; a paused run is in flight but only a human moves it.
RUN_TICKABLE: frozenset[RunStatus] = frozenset({_R.SCHEDULED, _R.STARTING, _R.RUNNING, _R.ENDING})
# Statuses that hold a concurrency key: a scheduled run has not taken it yet.
RUN_HOLDS_KEY: frozenset[RunStatus] = RUN_IN_FLIGHT - {_R.SCHEDULED}
# Statuses in which the tick, not a human, is what moves the run on: past the start, not ended.
# A run here that nobody advances is ``stalled``.
RUN_IN_PROGRESS: frozenset[RunStatus] = frozenset({_R.STARTING, _R.RUNNING, _R.ENDING})
# The statuses a run may have while its steps are settled. A run that ended while one of its
# steps was out being dispatched must not get that step parked or settled as if nothing
# happened: that left a live cue, and a ``running`` step, on a dead run.
RUN_SETTLES_STEPS: frozenset[RunStatus] = frozenset({_R.RUNNING, _R.PAUSED})
# The terminal statuses a run reaches before completing (``lifecycle.move_run(cancel_open=True)``): what it still
# waits on is cancelled with it.
RUN_ENDED_EARLY: frozenset[RunStatus] = RUN_TERMINAL - {_R.COMPLETED}

RUN_TRANSITIONS: Mapping[RunStatus, frozenset[RunStatus]] = MappingProxyType(
    {
        _R.SCHEDULED: frozenset({_R.STARTING, _R.MISSED, _R.CANCELLED}),
        _R.STARTING: frozenset({_R.RUNNING, _R.CANCELLED}),
        # running -> running is the tick moving ``current_phase`` ("still running" is the guard).
        _R.RUNNING: frozenset({_R.RUNNING, _R.PAUSED, _R.ENDING, _R.FAILED, _R.CANCELLED}),
        # paused -> failed is not drawn in the design: a step that was out when its run was
        # paused (or was given up by the reclaim then) applies its ``abort_run`` all the same.
        _R.PAUSED: frozenset({_R.RUNNING, _R.FAILED, _R.CANCELLED}),
        _R.ENDING: frozenset({_R.COMPLETED, _R.CANCELLED}),
        **{status: frozenset() for status in RUN_TERMINAL},
    }
)

_L = ListingStatus

# The listings never pushed again: the mirror leaves these rows alone (``bridge.sql.listings``),
# and retention may delete them with their run.
LISTING_FINAL: frozenset[ListingStatus] = frozenset({_L.COMPLETED, _L.CANCELLED, _L.GONE, _L.SKIPPED})
# The listings that occupy one of Discord's 100 slots.
LISTING_LISTED: frozenset[ListingStatus] = frozenset({_L.SCHEDULED, _L.ACTIVE})

_S = StepStatus

STEP_OPEN: frozenset[StepStatus] = frozenset({_S.PENDING, _S.RUNNING})
STEP_SETTLED: frozenset[StepStatus] = frozenset({_S.DONE, _S.SKIPPED, _S.FAILED})

# ``running`` covers both a leased step and a parked cue (running with a NULL lease); the SQL
# guards in ``runner/sql/step_guards.py`` tell the two apart.
STEP_TRANSITIONS: Mapping[StepStatus, frozenset[StepStatus]] = MappingProxyType(
    {
        _S.PENDING: frozenset({_S.RUNNING, _S.SKIPPED, _S.CANCELLED}),
        # running -> running: leased -> parked. running -> cancelled: a dispatch that comes back,
        # or is reclaimed, after its run ended; or a parked cue of a run that ended.
        _S.RUNNING: frozenset({_S.RUNNING, _S.DONE, _S.PENDING, _S.FAILED, _S.SKIPPED, _S.CANCELLED}),
        # The retry control; the reclaim's give-up is failed, never handed back after that.
        _S.FAILED: frozenset({_S.PENDING}),
        _S.DONE: frozenset(),
        _S.SKIPPED: frozenset(),
        _S.CANCELLED: frozenset(),
    }
)


def run_may_move(from_: RunStatus | str, to: RunStatus | str) -> bool:
    return RunStatus(to) in RUN_TRANSITIONS[RunStatus(from_)]


def step_may_move(from_: StepStatus | str, to: StepStatus | str) -> bool:
    return StepStatus(to) in STEP_TRANSITIONS[StepStatus(from_)]


class SignupStatus(enum.StrEnum):
    """A member's sign-up to a run (``runner.signups``): a seat, a place in the waiting list, or
    left. A waitlisted member becomes confirmed only by a leave's promotion."""

    CONFIRMED = "confirmed"
    WAITLISTED = "waitlisted"
    CANCELLED = "cancelled"


class SignupOverride(enum.StrEnum):
    """Staff's word on whether a run's sign-ups take anyone new, over the definition's schedule
    (``/event signups close|reopen``): closed until reopened, or open until the run ends."""

    CLOSED = "closed"
    OPEN = "open"


class StaffSignupChange(enum.StrEnum):
    """What staff did to one member's sign-up (``/event signups add|move|remove``)."""

    ADDED = "added"
    MOVED = "moved"
    REMOVED = "removed"


class Attendance(enum.StrEnum):
    """Whether a seated member came (``event_attendance``): marked by a GM at a cue or by staff
    afterwards; a late cancel is recorded when the member leaves late."""

    ATTENDED = "attended"
    NO_SHOW = "no_show"
    LATE_CANCEL = "late_cancel"


class SignupImport(enum.StrEnum):
    """What importing a member from the Discord scheduled event's Interested list did
    (``event_signup_imports``): signed up to ``signup.interested`` (a seat or its waiting list),
    or refused for lacking ``signup.roles``. Either way the member is not imported again."""

    JOINED = "joined"
    NOT_ALLOWED_ROLE = "not_allowed_role"


class CueAnswer(enum.StrEnum):
    """How a GM answered a cue, as a step's ``when`` names it (``runner.definitions.conditions``):
    a cue step ``done`` was confirmed, one ``skipped`` was skipped."""

    CONFIRMED = "confirmed"
    SKIPPED = "skipped"


class CleanupStatus(enum.StrEnum):
    """A run's cleanup (the seeds' ``cleanup_status``): nothing to undo, undos waiting to run
    after a cancel with cleanup, all undone, or some could not be."""

    NOT_REQUIRED = "not_required"
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class DmGivenUp(enum.StrEnum):
    """How a reminder's DM to a member ended without reaching them (``event_reminder_dms``):
    dropped (the event started, or they turned reminders off) or failed after its attempts."""

    DROPPED = "dropped"
    FAILED = "failed"


class UndoStatus(enum.StrEnum):
    """One entry of a run's cleanup ledger: recorded when its step succeeded, run (each once) in
    reverse order by a cancel with cleanup; ``manual`` entries are listed for staff instead."""

    RECORDED = "recorded"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    MANUAL = "manual"


UNDO_OPEN: frozenset[UndoStatus] = frozenset({UndoStatus.RECORDED, UndoStatus.RUNNING})


SIGNUP_ACTIVE: frozenset[SignupStatus] = frozenset({SignupStatus.CONFIRMED, SignupStatus.WAITLISTED})
