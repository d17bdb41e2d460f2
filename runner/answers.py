"""What a control answers: a reason code and the facts behind it, never prose.

The controls decide; the front ends word. A ``ControlResult`` says which control answered, what
happened (``Reason``) and the structured facts a front end needs to say it in its own medium (the
run's status, who settled a step, which runs were started). The Discord front end renders it in
``bot.cogs.control._render``, the rehearsal and the command line in plain text; nothing has to pull a fact
back out of a sentence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any

from runner.history import Actor
from runner.records import RunRecord, StepRecord
from runner.states import RUN_TERMINAL, STEP_OPEN, Control, RunStatus, StepStatus


class Reason(enum.StrEnum):
    """What happened. The first group are answers of a control that acted (``ok``)."""

    STARTED = "started"
    PAUSED = "paused"
    RESUMED = "resumed"
    CANCELLED = "cancelled"
    RETRYING = "retrying"
    CONFIRMED = "confirmed"
    SKIPPED = "skipped"
    APPROVED = "approved"

    # ── refusals: nothing changed ──
    NO_SUCH_RUN = "no_such_run"
    NO_SUCH_STEP = "no_such_step"
    # ``run_status`` says which ended status (completed, cancelled, failed, missed).
    RUN_ENDED = "run_ended"
    # The run is in flight but not in the status this control acts from (``run_status``).
    WRONG_RUN_STATUS = "wrong_run_status"
    ALREADY_PAUSED = "already_paused"
    UNKNOWN_DEFINITION = "unknown_definition"
    NO_SUCH_SCOPE = "no_such_scope"
    ALREADY_IN_FLIGHT = "already_in_flight"
    NOTHING_STARTED = "nothing_started"
    REASON_REQUIRED = "reason_required"
    NOTHING_TO_RETRY = "nothing_to_retry"
    NO_LONGER_FAILED = "no_longer_failed"
    RACED = "raced"
    NOT_A_CUE_VERB = "not_a_cue_verb"
    NOT_A_CUE = "not_a_cue"
    OTHER_CUE_MESSAGE = "other_cue_message"
    # The step is not held back for an approval (never was, or it was approved already: ``by``).
    NOT_AWAITING_APPROVAL = "not_awaiting_approval"
    ALREADY_APPROVED = "already_approved"
    # A confirm of a step parked on its approval request: only approve (or skip) answers it.
    AWAITS_APPROVAL = "awaits_approval"
    # A step left open on a run that ended (``run_status``): the run is the reason.
    STEP_OF_ENDED_RUN = "step_of_ended_run"
    ALREADY_CONFIRMED = "already_confirmed"
    # Done by its action, not by a person: there is nobody to name.
    ALREADY_DONE = "already_done"
    ALREADY_SKIPPED = "already_skipped"
    # ``run_status`` is set when the step was cancelled because its run ended.
    STEP_CANCELLED = "step_cancelled"
    STEP_FAILED = "step_failed"
    STEP_IN_PROGRESS = "step_in_progress"
    STEP_NOT_REACHED = "step_not_reached"
    WRONG_STEP_STATUS = "wrong_step_status"


@dataclass(frozen=True)
class CueRef:
    """Where a cue was posted and how it stands, so a front end can bring its message up to date
    without reading the run again."""

    step_id: int
    run_id: int
    # ``None``: the step is gone.
    status: StepStatus | None
    result: dict[str, Any] | None
    # Who settled it by hand (a confirm or a skip), and, when it was cancelled, its run's error
    # (the cancel's reason, a failure).
    settled_by: Actor | None = None
    why: str | None = None


@dataclass(frozen=True)
class ControlResult:
    """One control's answer. Only the fields its ``reason`` needs are set."""

    ok: bool
    control: Control
    reason: Reason
    run_id: int | None = None
    step_id: int | None = None
    run_ids: tuple[int, ...] = ()
    cues: tuple[CueRef, ...] = field(default_factory=tuple)
    # The run's status: why it was refused, or (confirm, skip) what it is after acting.
    run_status: RunStatus | None = None
    step_status: StepStatus | None = None
    # Who settled the step already (already_confirmed, already_skipped).
    by: Actor | None = None
    definition_key: str | None = None
    title: str | None = None
    rehearsal: bool = False
    scope: str | None = None
    scopes: tuple[str, ...] = ()
    # (scope, run id) of each run already in flight (already_in_flight).
    busy: tuple[tuple[str, int], ...] = ()
    # The retried step's label, the cancel's reason, the verb a cue was pressed with.
    label: str | None = None
    cancel_reason: str | None = None
    verb: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    @property
    def message(self) -> str:
        """The code and its facts, for logs and assertion messages (``pause: run_ended
        run_id=4 run_status=cancelled``); front ends render words from the fields instead."""
        facts = [
            f"{f.name}={str(value)!r}" if isinstance(value, str) else f"{f.name}={value}"
            for f in fields(self)
            if f.name not in ("ok", "control", "reason", "cues")
            and (value := getattr(self, f.name)) not in (None, (), False)
        ]
        return " ".join([f"{self.control}: {self.reason}", *facts])


# ── Why a control refused, decided from the rows it read ──────────────────

# The action whose steps carry Confirm / Skip buttons. A button names its step by id in a custom
# id; ``settle_cue`` refuses any step of another action, so a forged id cannot skip an
# announcement that has not gone out.
CUE_ACTION = "gm.cue"


def _posted_message(step: StepRecord) -> str | None:
    """The message id a cue step's action answered it was posted as, if it says."""
    result = step.result
    posted = result.get("posted") if isinstance(result, dict) else None
    message_id = posted.get("message_id") if isinstance(posted, dict) else None
    return str(message_id) if message_id is not None else None


def not_this_cue(
    control: Control, step: StepRecord, step_id: int, message_id: str | None
) -> ControlResult | None:
    """Why a cue button may not act on ``step``: it is no GM cue, or the cue was posted as
    another message than the one whose button was pressed (a stale or copied custom id)."""
    if step.action_id != CUE_ACTION:
        return ControlResult(False, control, Reason.NOT_A_CUE, step_id=step_id)
    posted = _posted_message(step)
    if message_id is not None and posted is not None and posted != message_id:
        return ControlResult(False, control, Reason.OTHER_CUE_MESSAGE, step_id=step_id)
    return None


def confirm_refused(
    step: StepRecord, step_id: int, message_id: str | None, *, cue_only: bool
) -> ControlResult | None:
    """Why a confirm may not act on ``step``: a cue's button on anything but its own cue
    (``not_this_cue``), or any confirm of a step parked on its approval request, which would
    mark a risky step done without performing it (only approve or skip answer that)."""
    if cue_only:
        return not_this_cue(Control.CONFIRM, step, step_id, message_id)
    result = step.result
    if step.parked and isinstance(result, dict) and result.get("approval") == "awaiting":
        return ControlResult(False, Control.CONFIRM, Reason.AWAITS_APPROVAL, step_id=step_id)
    return None


def refused_run(control: Control, run: RunRecord | None, run_id: int, **facts: Any) -> ControlResult:
    """Why ``control`` could not act on this run: there is none, it ended, or it is in flight in
    another status than the one the control acts from."""
    if run is None:
        return ControlResult(False, control, Reason.NO_SUCH_RUN, run_id=run_id, **facts)
    reason = Reason.RUN_ENDED if run.status in RUN_TERMINAL else Reason.WRONG_RUN_STATUS
    return ControlResult(False, control, reason, run_id=run_id, run_status=run.status, **facts)


def refused_step(
    control: Control, step: StepRecord | None, step_id: int, run: RunRecord | None, **facts: Any
) -> ControlResult:
    """Why a confirm or skip could not act on this step (its status, or its run's)."""
    if step is None:
        return ControlResult(False, control, Reason.NO_SUCH_STEP, step_id=step_id, **facts)
    status = step.status
    run_status = run.status if run is not None else None
    ended = run_status in RUN_TERMINAL
    said: dict[str, Any] = {}
    if status in STEP_OPEN and ended:
        # Left open on a run that ended (only a step out being dispatched can be): the run is
        # the reason, whatever the step looks like.
        reason = Reason.STEP_OF_ENDED_RUN
        said["run_status"] = run_status
    elif status == StepStatus.DONE:
        said["by"] = step.settled_by
        reason = Reason.ALREADY_CONFIRMED if said["by"] is not None else Reason.ALREADY_DONE
    elif status == StepStatus.SKIPPED:
        reason = Reason.ALREADY_SKIPPED
        said["by"] = step.settled_by
    elif status == StepStatus.CANCELLED:
        reason = Reason.STEP_CANCELLED
        said["run_status"] = run_status if ended else None
    elif status == StepStatus.FAILED:
        reason = Reason.STEP_FAILED
    elif step.leased:
        reason = Reason.STEP_IN_PROGRESS
    elif status == StepStatus.PENDING:
        reason = Reason.STEP_NOT_REACHED
    else:
        reason = Reason.WRONG_STEP_STATUS
    return ControlResult(False, control, reason, step_id=step_id, step_status=status, **said, **facts)


def cue_ref(step: StepRecord | None, step_id: int, run_id: int, run: RunRecord | None) -> CueRef:
    """The cue as it stands after a refused settle, so its message can be brought up to date."""
    if step is None:
        return CueRef(step_id, run_id, None, None)
    why = run.last_error if run is not None and step.status is StepStatus.CANCELLED else None
    return CueRef(step_id, run_id, step.status, step.result, settled_by=step.settled_by, why=why)
