"""Why a run stopped, in the words both front ends use (the rehearsal's console, ``/event status``).

The engine writes a run's ``last_error`` once, when a step's failure stops it, and names the step
by its id and its action (``step 5 (discord.announce) failed: …``). A person reads that step
elsewhere by its id and its label (``runner.views.step_name``: the rehearsal's step lines, the
status embed's ``5`` beside the label), so ``step 5 (discord.announce)`` read under ``step 5 (Open
the gates)`` looks like a second step. What a run's history already holds keeps that wording
forever, so it is reworded where it is shown, from the run's own steps.
"""

from __future__ import annotations

import re

from runner.states import StepStatus
from runner.views import RunView, StepView, step_name

# The engine's words for a failure that stopped the run (runner.engine.core.apply_on_failure).
STEP_FAILED = re.compile(r"step (?P<id>[0-9]+) \([^()]*\) failed: (?P<error>.*)", re.DOTALL)


def _failure(run: RunView) -> tuple[StepView, str] | None:
    found = STEP_FAILED.fullmatch(run.last_error or "")
    if found is None:
        return None
    step_id = int(found["id"])
    step = next((s for p in run.phases for s in p.steps if s.id == step_id), None)
    return (step, found["error"]) if step is not None else None


def failed_step(run: RunView) -> StepView | None:
    """The step whose failure the run's last error reports, if it reports one of its steps."""
    failure = _failure(run)
    return failure[0] if failure else None


def last_error_text(run: RunView) -> str | None:
    """The run's last error with a failed step named as ``step_name`` names it (with its label);
    any other error (a pause, a cancel, a missed start) as it was written."""
    failure = _failure(run)
    if failure is None:
        return run.last_error
    step, error = failure
    return f"{step_name(step.id, step.label)} failed: {error}"


# How a pruned run's reminder counts read (as /event status words them); a step's count, and a
# status not listed here, reads as the status itself.
_S = StepStatus
_REMINDER_WORDS: dict[str, str] = {
    _S.DONE: "sent",
    _S.SKIPPED: "not sent",
    _S.FAILED: "not delivered",
}


def _counted(counts: dict[str, int], noun: str, words: dict[str, str] | None = None) -> str | None:
    total = sum(counts.values())
    if not total:
        return None
    parts = ", ".join(f"{n} {(words or {}).get(status, status)}" for status, n in sorted(counts.items()) if n)
    return f"{total} {noun}{'' if total == 1 else 's'} ({parts})"


def pruned_text(run: RunView) -> str | None:
    """What is left to say of a run whose steps and history retention pruned, or None."""
    if run.pruned is None:
        return None
    kept = [
        part
        for part in (
            _counted(run.pruned.steps, "step"),
            _counted(run.pruned.reminders, "reminder", _REMINDER_WORDS),
        )
        if part
    ]
    head = "Its steps and run log were pruned after the retention period"
    return f"{head}: {'; '.join(kept)}." if kept else f"{head}."
