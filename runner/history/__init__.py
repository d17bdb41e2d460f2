"""The run log: every kind of line defined once, written by ``record``, read by one reader.

Each kind is a frozen dataclass whose fields are the line's ``detail`` keys, so a writer cannot
misspell a key and every front end (the staff log, ``/event status``, ``runs``, the rehearsal
transcript) reads the same typed ``Entry``. The package is cut by role, and this module is its
public face (importers name ``runner.history``, not the parts):

- ``events``: what a line can say (one dataclass per kind, ``parse_event``), over the kinds and
  the ``Actor`` of ``runner.kinds``, the leaf the statements share;
- ``writer``: ``record``, ``written_together`` and its ``LineBatch``;
- ``reader``: ``Entry``, ``entries_for_run``, ``entries_followed``, ``how_run_ended``.
"""

from runner.history.events import (
    CleanupFinished,
    CleanupStarted,
    Event,
    GenericEvent,
    PhaseCompleted,
    PhaseStarted,
    ReminderFailed,
    ReminderSent,
    ReminderSkip,
    ReminderSkipped,
    RunBlocked,
    RunCreated,
    RunDegraded,
    RunMoved,
    RunRecovered,
    RunRepointed,
    RunStalled,
    RunStatusChanged,
    SignupChangedByStaff,
    SignupLateCancel,
    SignupPromoted,
    SignupsOverridden,
    StallReason,
    StepApproved,
    StepCancelled,
    StepConfirmed,
    StepDone,
    StepFailed,
    StepParked,
    StepReclaimed,
    StepRequeued,
    StepRetry,
    StepSkipped,
    UndoFailed,
    UndoRan,
    parse_event,
)
from runner.history.reader import (
    Entry,
    RunEnding,
    ending_from,
    entries_followed,
    entries_for_run,
    how_run_ended,
)
from runner.history.writer import LineBatch, record, written_together
from runner.kinds import Actor, Kind

__all__ = [
    "Actor",
    "CleanupFinished",
    "CleanupStarted",
    "Entry",
    "Event",
    "GenericEvent",
    "Kind",
    "LineBatch",
    "PhaseCompleted",
    "PhaseStarted",
    "ReminderFailed",
    "ReminderSent",
    "ReminderSkip",
    "ReminderSkipped",
    "RunBlocked",
    "RunCreated",
    "RunDegraded",
    "RunEnding",
    "RunMoved",
    "RunRecovered",
    "RunRepointed",
    "RunStalled",
    "RunStatusChanged",
    "SignupChangedByStaff",
    "SignupLateCancel",
    "SignupPromoted",
    "SignupsOverridden",
    "StallReason",
    "StepApproved",
    "StepCancelled",
    "StepConfirmed",
    "StepDone",
    "StepFailed",
    "StepParked",
    "StepReclaimed",
    "StepRequeued",
    "StepRetry",
    "StepSkipped",
    "UndoFailed",
    "UndoRan",
    "ending_from",
    "entries_followed",
    "entries_for_run",
    "how_run_ended",
    "parse_event",
    "record",
    "written_together",
]
