"""How a rehearsal answers a parked step: a GM cue is confirmed or skipped, and a step waiting
for a staff approval (``runner.approvals``) is treated like a cue, approved or skipped."""

from __future__ import annotations

from runner.approvals import asks_approval
from runner.controls import ControlResult, Controls
from runner.history import Actor
from runner.states import Control
from runner.views import StepView


async def answer_parked(controls: Controls, step: StepView, choice: str, actor: Actor) -> ControlResult:
    """``choice`` is ``confirm`` or ``skip``; a confirm of an approval request is its approve."""
    assert step.id is not None
    if choice != Control.CONFIRM:
        return await controls.skip(step.id, actor=actor)
    if asks_approval(step.result):
        return await controls.approve(step.id, actor=actor)
    return await controls.confirm(step.id, actor=actor)
