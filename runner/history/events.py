"""What a run-log line can say: every kind, once, as a frozen dataclass of its detail fields.

A field's stored key and codec are worked out from its annotation; the stored JSON keeps the
shape it always had (a field ``from_`` is stored as ``from``; a field that defaults to ``None``
is left out when unset), so lines written before these classes existed read back as the same
events. History is forever: a line whose kind or fields this code no longer knows reads as a
``GenericEvent`` carrying what was stored, never as an error.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from runner.history.fields import fields_of
from runner.kinds import Kind
from runner.states import CleanupStatus, Health, RunStatus, SignupOverride, SignupStatus, StaffSignupChange


@dataclass(frozen=True)
class Event:
    """A typed run-log line. Subclasses are frozen dataclasses with a ``KIND``."""

    KIND: ClassVar[Kind]

    @property
    def kind(self) -> str:
        return self.KIND.value

    def detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields_of(type(self)):
            value = getattr(self, f.name)
            if value is None and f.omit_none:
                continue
            out[f.key] = value if value is None or f.codec is None else f.codec[0](value)
        return out

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> Event:
        """Raises ``ValueError`` / ``TypeError`` / ``KeyError`` for a detail this class does not
        describe (the reader then keeps it as a ``GenericEvent``)."""
        known = {f.key: f for f in fields_of(cls)}
        unknown = set(detail) - set(known)
        if unknown:
            raise ValueError(f"fields this code does not know: {sorted(unknown)}")
        values: dict[str, Any] = {}
        for key, f in known.items():
            if key not in detail:
                if f.required:
                    raise KeyError(key)
                continue
            value = detail[key]
            values[f.name] = value if value is None or f.codec is None else f.codec[1](value)
        return cls(**values)


@dataclass(frozen=True)
class GenericEvent(Event):
    """A stored line whose kind or fields this code does not know (written by an older or newer
    version, or by hand): kept as it was stored."""

    name: str
    values: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return self.name

    def detail(self) -> dict[str, Any]:
        return dict(self.values)


@dataclass(frozen=True)
class RunCreated(Event):
    KIND: ClassVar[Kind] = Kind.RUN_CREATED
    definition: str
    version_id: int
    scope: str
    scheduled_for: dt.datetime
    rehearsal: bool = False


@dataclass(frozen=True)
class RunStatusChanged(Event):
    """``run.status``: written by ``lifecycle.move_run`` only."""

    KIND: ClassVar[Kind] = Kind.RUN_STATUS
    to: RunStatus
    from_: RunStatus | None = None
    # Which control moved it (pause, resume, retry, cancel); unset when the tick did.
    control: str | None = None
    reason: str | None = None
    error: str | None = None
    steps_cancelled: int | None = None
    scheduled_for: dt.datetime | None = None


@dataclass(frozen=True)
class RunBlocked(Event):
    KIND: ClassVar[Kind] = Kind.RUN_BLOCKED
    key: str
    holder_run_id: int


@dataclass(frozen=True)
class RunDegraded(Event):
    KIND: ClassVar[Kind] = Kind.RUN_DEGRADED
    reason: str


class StallReason(enum.StrEnum):
    # Far past its wake with no live lease: nobody is advancing it.
    OVERDUE = "overdue"
    # The reclaim keeps handing one of its steps back: its runner keeps dying on it.
    RECLAIMED = "reclaimed"


@dataclass(frozen=True)
class RunStalled(Event):
    KIND: ClassVar[Kind] = Kind.RUN_STALLED
    reason: StallReason
    # The health it had before (so a recovery can tell ``ok`` from ``degraded``).
    from_: Health
    wake_at: dt.datetime | None = None
    overdue_seconds: float | None = None
    step_id: int | None = None
    reclaims: int | None = None


@dataclass(frozen=True)
class RunRecovered(Event):
    KIND: ClassVar[Kind] = Kind.RUN_RECOVERED
    to: Health


@dataclass(frozen=True)
class RunRepointed(Event):
    """A run not yet started follows a newly published version of its event."""

    KIND: ClassVar[Kind] = Kind.RUN_REPOINTED
    from_version_id: int
    version_id: int
    version: int


@dataclass(frozen=True)
class RunMoved(Event):
    """A run not yet started starts at another time: a new version moved its date."""

    KIND: ClassVar[Kind] = Kind.RUN_MOVED
    from_at: dt.datetime
    to_at: dt.datetime
    version: int


@dataclass(frozen=True)
class PhaseStarted(Event):
    KIND: ClassVar[Kind] = Kind.PHASE_STARTED
    phase: str


@dataclass(frozen=True)
class PhaseCompleted(Event):
    KIND: ClassVar[Kind] = Kind.PHASE_COMPLETED
    phase: str


@dataclass(frozen=True)
class StepDone(Event):
    KIND: ClassVar[Kind] = Kind.STEP_DONE
    action: str
    attempts: int
    hold_until: dt.datetime | None = None


@dataclass(frozen=True)
class StepParked(Event):
    KIND: ClassVar[Kind] = Kind.STEP_PARKED
    action: str


@dataclass(frozen=True)
class StepRetry(Event):
    KIND: ClassVar[Kind] = Kind.STEP_RETRY
    attempts: int
    error: str
    due_at: dt.datetime


@dataclass(frozen=True)
class StepFailed(Event):
    KIND: ClassVar[Kind] = Kind.STEP_FAILED
    error: str
    # Unset when the reclaim gave up on it (its runner died, nothing answered).
    action: str | None = None
    attempts: int | None = None


@dataclass(frozen=True)
class StepCancelled(Event):
    KIND: ClassVar[Kind] = Kind.STEP_CANCELLED
    # The reclaim found its run ended: ``reason``. A dispatch came back to an ended run: the
    # action, what it answered and the status the run was in.
    reason: str | None = None
    action: str | None = None
    outcome: str | None = None
    run_status: RunStatus | None = None


@dataclass(frozen=True)
class StepReclaimed(Event):
    KIND: ClassVar[Kind] = Kind.STEP_RECLAIMED
    attempts: int


@dataclass(frozen=True)
class StepRequeued(Event):
    KIND: ClassVar[Kind] = Kind.STEP_REQUEUED
    previous_error: str | None


@dataclass(frozen=True)
class StepConfirmed(Event):
    KIND: ClassVar[Kind] = Kind.STEP_CONFIRMED
    note: str | None


@dataclass(frozen=True)
class StepSkipped(Event):
    KIND: ClassVar[Kind] = Kind.STEP_SKIPPED
    note: str | None


@dataclass(frozen=True)
class StepApproved(Event):
    """Staff approved a step its action's risk held back (``runner.approvals``); who is the
    line's actor."""

    KIND: ClassVar[Kind] = Kind.STEP_APPROVED
    action: str
    risk: str


class ReminderSkip(enum.StrEnum):
    """Why a reminder was not sent."""

    # Its moment passed longer than the definition's grace ago (the bot was down): a "starts in
    # 15 minutes" sent an hour late would be wrong, so it is never sent late.
    LATE = "late"
    # The occurrence started first: a reminder must not come after the start.
    RUN_STARTED = "run started"
    # A new version of the event no longer has this reminder.
    REPUBLISHED = "republished"


@dataclass(frozen=True)
class ReminderSent(Event):
    KIND: ClassVar[Kind] = Kind.REMINDER_SENT
    # The lead before the start, in seconds, and the start it announced.
    before: float
    starts_at: dt.datetime
    attempts: int
    # How long after its moment it went out.
    late_seconds: float | None = None


@dataclass(frozen=True)
class ReminderSkipped(Event):
    KIND: ClassVar[Kind] = Kind.REMINDER_SKIPPED
    reason: ReminderSkip
    before: float | None = None
    late_seconds: float | None = None


@dataclass(frozen=True)
class ReminderFailed(Event):
    KIND: ClassVar[Kind] = Kind.REMINDER_FAILED
    error: str
    attempts: int
    before: float | None = None


@dataclass(frozen=True)
class SignupPromoted(Event):
    """A member left and the first waitlisted member whose option had room took the seat."""

    KIND: ClassVar[Kind] = Kind.SIGNUP_PROMOTED
    member_id: str
    member_name: str
    option: str
    # Who left, freeing the seat.
    left_id: str | None = None
    left_name: str | None = None


@dataclass(frozen=True)
class SignupLateCancel(Event):
    """A confirmed member left less than the sign-up's ``late_cancel`` before the start."""

    KIND: ClassVar[Kind] = Kind.SIGNUP_LATE_CANCEL
    member_id: str
    member_name: str
    option: str
    # How long before the start they left, in seconds (negative: after it).
    before_start: float
    starts_at: dt.datetime


@dataclass(frozen=True)
class SignupChangedByStaff(Event):
    """Staff added, moved or removed a member (the line's actor says who did it)."""

    KIND: ClassVar[Kind] = Kind.SIGNUP_BY_STAFF
    member_id: str
    member_name: str
    change: StaffSignupChange
    option: str
    status: SignupStatus | None = None  # an add's or a move's: a seat, or the waiting list
    from_option: str | None = None


# Staff closed the run's sign-ups, or reopened them until the run ends.
@dataclass(frozen=True)
class SignupsOverridden(Event):
    KIND: ClassVar[Kind] = Kind.SIGNUP_OVERRIDE
    override: SignupOverride


@dataclass(frozen=True)
class CleanupStarted(Event):
    """A cancel with cleanup: ``undos`` entries of the ledger to run (latest first), ``manual``
    ones listed for staff to undo by hand."""

    KIND: ClassVar[Kind] = Kind.CLEANUP_STARTED
    undos: int
    manual: int = 0


@dataclass(frozen=True)
class UndoRan(Event):
    KIND: ClassVar[Kind] = Kind.UNDO_DONE
    label: str
    attempts: int


@dataclass(frozen=True)
class UndoFailed(Event):
    KIND: ClassVar[Kind] = Kind.UNDO_FAILED
    label: str
    error: str
    attempts: int


@dataclass(frozen=True)
class CleanupFinished(Event):
    KIND: ClassVar[Kind] = Kind.CLEANUP_FINISHED
    status: CleanupStatus


_BY_KIND: dict[str, type[Event]] = {
    cls.KIND.value: cls
    for cls in (
        RunCreated,
        RunStatusChanged,
        RunBlocked,
        RunDegraded,
        RunStalled,
        RunRecovered,
        RunRepointed,
        RunMoved,
        PhaseStarted,
        PhaseCompleted,
        StepDone,
        StepParked,
        StepRetry,
        StepFailed,
        StepCancelled,
        StepReclaimed,
        StepRequeued,
        StepConfirmed,
        StepSkipped,
        StepApproved,
        ReminderSent,
        ReminderSkipped,
        ReminderFailed,
        SignupPromoted,
        SignupLateCancel,
        SignupChangedByStaff,
        SignupsOverridden,
        CleanupStarted,
        UndoRan,
        UndoFailed,
        CleanupFinished,
    )
}
assert set(_BY_KIND) == {kind.value for kind in Kind}, "every kind has exactly one event class"


def parse_event(kind: str, detail: Mapping[str, Any] | None) -> Event:
    """The typed event for a stored line; a ``GenericEvent`` for one this code does not know."""
    if detail is not None and not isinstance(detail, Mapping):
        return GenericEvent(kind, {"value": detail})
    stored_detail = dict(detail or {})
    cls = _BY_KIND.get(kind)
    if cls is None:
        return GenericEvent(kind, stored_detail)
    try:
        return cls.from_detail(stored_detail)
    except (KeyError, TypeError, ValueError):
        return GenericEvent(kind, stored_detail)
