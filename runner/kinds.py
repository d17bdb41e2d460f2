"""The words the run log and the store share: what kind a line is (``Kind``) and who did
something by hand (``Actor``).

A leaf: it imports nothing from ``runner``, so the statements (``runner.sql``, ``runner.records``)
and the run log that is written and read through them (``runner.history``) both build on it
without importing each other. Importers outside the store keep naming ``runner.history``, which
exports both.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    """Who did something by hand: an id a front end can turn back into a mention (a Discord user
    id; ``None`` for the command line, the schedule or a rehearsal) and a display name."""

    id: str | None
    name: str


class Kind(enum.StrEnum):
    RUN_CREATED = "run.created"
    RUN_STATUS = "run.status"
    RUN_BLOCKED = "run.blocked"
    RUN_DEGRADED = "run.degraded"
    RUN_STALLED = "run.stalled"
    RUN_RECOVERED = "run.recovered"
    RUN_REPOINTED = "run.repointed"
    RUN_MOVED = "run.moved"
    PHASE_STARTED = "phase.started"
    PHASE_COMPLETED = "phase.completed"
    STEP_DONE = "step.done"
    STEP_PARKED = "step.parked"
    STEP_RETRY = "step.retry"
    STEP_FAILED = "step.failed"
    STEP_CANCELLED = "step.cancelled"
    STEP_RECLAIMED = "step.reclaimed"
    STEP_REQUEUED = "step.requeued"
    STEP_CONFIRMED = "step.confirmed"
    STEP_SKIPPED = "step.skipped"
    STEP_APPROVED = "step.approved"
    REMINDER_SENT = "reminder.sent"
    REMINDER_SKIPPED = "reminder.skipped"
    REMINDER_FAILED = "reminder.failed"
    SIGNUP_PROMOTED = "signup.promoted"
    SIGNUP_LATE_CANCEL = "signup.late_cancel"
    SIGNUP_BY_STAFF = "signup.by_staff"
    SIGNUP_OVERRIDE = "signup.override"
    CLEANUP_STARTED = "cleanup.started"
    UNDO_DONE = "undo.done"
    UNDO_FAILED = "undo.failed"
    CLEANUP_FINISHED = "cleanup.finished"
