"""A cue's answer decides what follows (the seeds' phase conditions, on a step): a step with
``when: {cue: <label>, is: confirmed}`` runs only when the GM confirmed that cue, one with
``is: skipped`` only when they skipped it. A step whose condition is not met is recorded
``skipped``, with why, and the run carries on: "Skip if too few players" no longer leads to "The
Warlord has appeared!".

The cue is named by its step's ``label``, and must be a ``gm.cue`` step earlier in the event (an
earlier phase, or earlier in the same phase): a cue blocks its phase until it is answered, so the
answer is known by the time the step is reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from runner.errors import Problem
from runner.states import CueAnswer, StepStatus

if TYPE_CHECKING:
    from runner.definitions.model import EventDefinition, StepDefinition

CUE_ACTION = "gm.cue"
# What a cue's step status says of its answer.
ANSWERS = {StepStatus.DONE: CueAnswer.CONFIRMED, StepStatus.SKIPPED: CueAnswer.SKIPPED}


class StepCondition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True)

    cue: str = Field(min_length=1, max_length=200, description="the label of an earlier gm.cue step")
    is_: CueAnswer = Field(alias="is")


def met(condition: StepCondition, cue_status: StepStatus | str | None) -> bool:
    """Whether the cue's answer is the one the step waits for (a cue that failed, or was
    cancelled, was neither confirmed nor skipped)."""
    answer = ANSWERS.get(StepStatus(cue_status)) if cue_status in set(StepStatus) else None
    return answer == condition.is_


def unmet_note(condition: StepCondition, cue_status: StepStatus | str | None) -> str:
    answer = ANSWERS.get(StepStatus(cue_status)) if cue_status in set(StepStatus) else None
    said = f"was {answer}" if answer else "was not answered"
    return f"runs only when cue {condition.cue!r} is {condition.is_.value}; it {said}"


def condition_of(definition: EventDefinition, phase_key: str, seq: int) -> StepCondition | None:
    for phase in definition.phases:
        if phase.key == phase_key:
            return phase.steps[seq].when if seq < len(phase.steps) else None
    return None


def condition_problems(definition: EventDefinition, file: str | None) -> list[Problem]:
    """Every ``when`` names a ``gm.cue`` step earlier in the event, by its label."""
    problems: list[Problem] = []
    cues_before: list[str] = []
    labels: dict[str, StepDefinition] = {}
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            condition = step.when
            if condition is not None and condition.cue not in cues_before:
                named = labels.get(condition.cue)
                if named is not None and named.action != CUE_ACTION:
                    why = f"names step {condition.cue!r}, a {named.action} step, not a gm.cue"
                elif named is not None or condition.cue == step.label:
                    why = f"names cue {condition.cue!r}, which does not come before this step"
                else:
                    known = ", ".join(repr(c) for c in cues_before) or "none"
                    why = f"names no cue {condition.cue!r} (the cues before this step: {known})"
                problems.append(Problem(why, file=file, phase=phase.key, step=index, field="when.cue"))
            if step.label is not None:
                labels.setdefault(step.label, step)
                if step.action == CUE_ACTION:
                    cues_before.append(step.label)
    return problems
