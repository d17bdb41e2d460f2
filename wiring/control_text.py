"""A control's answer in words: the one wording both front ends use.

The controls answer with a reason code and its facts (``runner.answers``); this turns them into
the sentence a moderator reads. The only thing that differs between media is how a person is
named, so that is a parameter: the rehearsal and the command line print the actor's name, the
Discord front end a mention (``bot.cogs.control._render.control_answer``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

from runner.answers import ControlResult, Reason
from runner.history import RunEnding
from runner.states import RUN_TERMINAL, Control, RunStatus
from runner.views import step_name

NO_SCOPES = "none (leave the scope empty)"
PAUSED_SUFFIX = "; the run is paused and will carry on when resumed"

Namer = Callable[[Any], str]


def plain_name(actor: Any) -> str:
    """An actor as plain text: its display name (or, for a bare string, the string)."""
    name = getattr(actor, "name", actor)
    return str(name) if name else "someone"


def run_status_words(status: RunStatus | str | None) -> str:
    """Where a run stands, as the end of "cannot pause: …"."""
    if status is None:
        return "the run is gone"
    status = RunStatus(status)
    match status:
        case RunStatus.COMPLETED:
            return "the run has already completed"
        case RunStatus.CANCELLED:
            return "the run was cancelled"
        case RunStatus.FAILED:
            return "the run has failed and ended"
        case RunStatus.MISSED:
            return "the run was missed (it did not start within its grace window)"
        case RunStatus.SCHEDULED:
            return "the run has not started yet"
        case RunStatus.STARTING:
            return "the run is starting"
        case RunStatus.RUNNING:
            return "the run is running"
        case RunStatus.PAUSED:
            return "the run is paused"
        case RunStatus.ENDING:
            return "the run is finishing"
        case _:
            assert_never(status)


def started_head(result: ControlResult) -> str:
    """A start of many scopes up to its list of runs (``started X in 3 scopes: runs ``)."""
    which = "rehearsal of " if result.rehearsal else ""
    return f"started {which}{result.title} in {len(result.run_ids)} scopes: runs "


def control_text(result: ControlResult, name: Namer = plain_name) -> str:
    """What happened, in one sentence without a trailing full stop."""
    reason = result.reason
    if reason in _WORDS:
        return _WORDS[reason](result, name)
    # A code this wording does not know yet still says something true.
    return f"{result.control}: {reason}"


def _started(r: ControlResult, name: Namer) -> str:
    if len(r.run_ids) > 1:
        return started_head(r) + ", ".join(map(str, r.run_ids))
    which = "rehearsal of " if r.rehearsal else ""
    return f"started {which}{r.title} as run {r.run_id}"


def _settled(word: str) -> Callable[[ControlResult, Namer], str]:
    return lambda r, name: word + (PAUSED_SUFFIX if r.run_status == RunStatus.PAUSED else "")


def _no_such_step(r: ControlResult, name: Namer) -> str:
    where = f" in run {r.run_id}" if r.control is Control.SKIP and r.run_id is not None else ""
    return f"no such step: {r.step_id}{where}"


def no_such_scope_head(result: ControlResult) -> str:
    """A refused scope up to the list of the event's scopes (``… its scopes are: ``)."""
    return f"{result.definition_key} has no scope {result.scope!r}; its scopes are: "


def _no_such_scope(r: ControlResult, name: Namer) -> str:
    return no_such_scope_head(r) + (", ".join(s for s in r.scopes if s) or NO_SCOPES)


def _in_flight(r: ControlResult, name: Namer) -> str:
    where = ", ".join(f"{scope or 'the event'} (run {run_id})" for scope, run_id in r.busy)
    return f"{r.definition_key} is already in flight: {where}"


def _step_cancelled(r: ControlResult, name: Namer) -> str:
    if r.run_status in RUN_TERMINAL:
        return f"{run_status_words(r.run_status)}, so this step was cancelled"
    return "that step was cancelled"


def _by(r: ControlResult, name: Namer) -> str:
    return f" by {name(r.by)}" if r.by else ""


_WORDS: dict[Reason, Callable[[ControlResult, Namer], str]] = {
    Reason.STARTED: _started,
    Reason.PAUSED: lambda r, name: f"run {r.run_id} paused",
    Reason.RESUMED: lambda r, name: f"run {r.run_id} resumed",
    Reason.CANCELLED: lambda r, name: f"run {r.run_id} cancelled: {r.cancel_reason}",
    Reason.RETRYING: lambda r, name: f"retrying {step_name(r.step_id, r.label)} of run {r.run_id}",
    Reason.CONFIRMED: _settled(Reason.CONFIRMED),
    Reason.SKIPPED: _settled(Reason.SKIPPED),
    Reason.APPROVED: lambda r, name: (
        f"approved {step_name(r.step_id)}: it runs now"
        + (PAUSED_SUFFIX if r.run_status == RunStatus.PAUSED else "")
    ),
    Reason.NO_SUCH_RUN: lambda r, name: f"cannot {r.control}: no such run: {r.run_id}",
    Reason.RUN_ENDED: lambda r, name: f"cannot {r.control}: {run_status_words(r.run_status)}",
    Reason.WRONG_RUN_STATUS: lambda r, name: f"cannot {r.control}: {run_status_words(r.run_status)}",
    Reason.ALREADY_PAUSED: lambda r, name: "the run is already paused",
    Reason.UNKNOWN_DEFINITION: lambda r, name: f"no published event is called {r.definition_key!r}",
    Reason.NO_SUCH_SCOPE: _no_such_scope,
    Reason.ALREADY_IN_FLIGHT: _in_flight,
    Reason.NOTHING_STARTED: lambda r, name: "nothing was started: those runs already exist",
    Reason.REASON_REQUIRED: lambda r, name: "a cancel needs a reason (it goes in the run's history)",
    Reason.NOTHING_TO_RETRY: lambda r, name: "nothing to retry: the run has not stopped at a failed step",
    Reason.NO_LONGER_FAILED: lambda r, name: "nothing to retry: that step is no longer failed",
    Reason.RACED: lambda r, name: "the run changed while retrying; nothing was changed, try again",
    Reason.NOT_A_CUE_VERB: lambda r, name: f"a cue answers confirm or skip, not {r.verb!r}",
    Reason.NOT_A_CUE: lambda r, name: f"{step_name(r.step_id)} is not a GM cue",
    Reason.OTHER_CUE_MESSAGE: lambda r, name: "this button belongs to another cue message",
    Reason.NOT_AWAITING_APPROVAL: lambda r, name: f"{step_name(r.step_id)} is not waiting for an approval",
    Reason.ALREADY_APPROVED: lambda r, name: f"already approved{_by(r, name)}",
    Reason.AWAITS_APPROVAL: lambda r, name: (
        f"{step_name(r.step_id)} waits for an approval: approve or skip it"
    ),
    Reason.NO_SUCH_STEP: _no_such_step,
    Reason.STEP_OF_ENDED_RUN: lambda r, name: run_status_words(r.run_status),
    Reason.ALREADY_CONFIRMED: lambda r, name: f"already confirmed{_by(r, name)}",
    Reason.ALREADY_DONE: lambda r, name: "that step is already done",
    Reason.ALREADY_SKIPPED: lambda r, name: f"already skipped{_by(r, name)}",
    Reason.STEP_CANCELLED: _step_cancelled,
    Reason.STEP_FAILED: lambda r, name: "that step failed; use retry, or resume to carry on past it",
    Reason.STEP_IN_PROGRESS: lambda r, name: (
        "that step is being carried out right now; try again in a moment"
    ),
    Reason.STEP_NOT_REACHED: lambda r, name: "that step has not been reached yet",
    Reason.WRONG_STEP_STATUS: lambda r, name: f"that step is {r.step_status}",
}


def closed_cue_text(ended: RunEnding, name: Namer = plain_name) -> str:
    """Why a cue posted while its run ended has its buttons off: the status, then who and why as
    far as the history knows them (``cancelled by <who>: <reason>``, or a failure's error)."""
    status = ended.status or "gone"
    head = f"the run was {status} while this was being posted"
    if ended.by is not None:
        return f"{head} ({status} by {name(ended.by)}" + (f": {ended.why})" if ended.why else ")")
    return f"{head} ({ended.why})" if ended.why else head
