"""Risk decides: a step whose action's risk is at or above the runner's threshold
(``RunnerSettings.approve_from``) waits for a staff approval before it is performed.

Such a step is claimed as any other, but instead of its action the engine asks the front end to
post an approval request (``RequestApproval``, the delivery's ``post_approval``) and parks the
step exactly as a cue parks: running, no lease, only a person moves it on. ``approve`` (the
control, ``Controls.approve``) puts it back to pending, due now, with who approved it; the next
claim sees it approved and performs the action, once, with the step's own idempotency key.
Skip is ``Controls.skip`` on the parked step, as for a cue.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.answers import ControlResult, CueRef, Reason, refused_step
from runner.clock import Clock
from runner.db import retry_on_conflict
from runner.dispatch import Classified, classify
from runner.history import Actor, StepApproved, record
from runner.records import RunRecord, StepRecord
from runner.registry import RISKS
from runner.sql import run_leases, step_settles
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import ActionOutcome, AnswerKey, Control, StepStatus

if TYPE_CHECKING:
    from runner.controls import Controls
    from runner.engine.context import EngineContext

log = logging.getLogger(__name__)

# ``approve_from``: the lowest risk that waits for an approval, or ``never``.
APPROVE_FROM = ("destructive", "moderate", "never")
# What a parked step's result says while it waits for its approval (``result["approval"]``).
AWAITING = "awaiting"
APPROVED = "approved"


def needs_approval(risk: str, approve_from: str) -> bool:
    """An action of ``risk`` waits for an approval under the threshold ``approve_from``."""
    if approve_from not in RISKS:
        return False  # ``never``
    return RISKS.index(risk) >= RISKS.index(approve_from) if risk in RISKS else True


@dataclass(frozen=True)
class ApprovalRequest:
    """What a front end shows staff to approve or skip: the step, its action and its risk."""

    run_id: int
    step_id: int
    label: str | None
    action_id: str
    action_label: str
    risk: str
    params: dict[str, Any]
    scope: str
    rehearsal: bool
    # Not the step's own key: the action performed after the approval sends that one, and a
    # platform deduplicating by key must not answer it with the request.
    idempotency_key: str


# Answers as an action does (``runner.states.AnswerKey``): ok with ``output`` (where the request
# went, e.g. ``{"posted": {...}}``), or a failure the engine retries or gives up on.
RequestApproval = Callable[[ApprovalRequest], Awaitable[dict[str, Any]]]


def asks_approval(result: Any) -> bool:
    """A step's result says it was parked on an approval request (not a cue waiting for a GM),
    answered or not."""
    return isinstance(result, dict) and result.get("approval") in (AWAITING, APPROVED)


def awaiting(step: StepRecord) -> bool:
    """Parked on its approval request, and not approved yet."""
    result = step.result
    return (
        step.parked
        and step.approved_at is None
        and isinstance(result, dict)
        and result.get("approval") == AWAITING
    )


def held_back(ctx: EngineContext, step: StepRecord) -> bool:
    """The step may not be performed yet: its action's risk needs an approval it does not have."""
    if step.approved_at is not None:
        return False
    action = ctx.registry.get(step.action_id)
    return action is not None and needs_approval(action.risk, ctx.settings.approve_from)


async def ask(ctx: EngineContext, run: RunRecord, step: StepRecord) -> Classified:
    """Post the step's approval request and answer "parked" with where it went; a request that
    could not be posted answers as a failed action would (retried, or given up on)."""
    action = ctx.registry.get(step.action_id)
    assert action is not None  # ``held_back`` said it is registered
    request = ApprovalRequest(
        run_id=run.id,
        step_id=step.id,
        label=step.label,
        action_id=action.id,
        action_label=action.label,
        risk=action.risk,
        params=dict(step.params or {}),
        scope=run.scope,
        rehearsal=run.rehearsal,
        idempotency_key=f"approval-{step.idempotency_key}",
    )
    output: dict[str, Any] = {}
    if ctx.request_approval is None:
        log.warning("step %s waits for an approval nothing can ask for", step.id, extra={"step_id": step.id})
    else:
        try:
            # The step's lease covers its action's budget: the request is held to the same.
            async with asyncio.timeout(action.budget_ms / 1000):
                answer = await ctx.request_approval(request)
        except TimeoutError:
            answer = {
                AnswerKey.TIMED_OUT: True,
                AnswerKey.ERROR: f"the approval request for {action.id} took too long",
            }
        except Exception as exc:
            log.warning(
                "step %s: approval request raised", step.id, exc_info=True, extra={"step_id": step.id}
            )
            answer = {
                AnswerKey.OK: False,
                AnswerKey.ERROR: f"the approval request raised {type(exc).__name__}: {exc}"[:500],
            }
        asked = classify(answer, action.id)
        if asked.outcome is not ActionOutcome.DONE:
            return asked
        output = dict(asked.output or {})
    return Classified(ActionOutcome.PARKED, output={**output, "approval": AWAITING, "risk": action.risk})


def _names_a_row(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 2**63 - 1


def _approver(step: StepRecord) -> Actor | None:
    return Actor(step.approved_by_id, step.approved_by_name) if step.approved_by_name is not None else None


async def approve(
    engine: AsyncEngine,
    clock: Clock,
    changed: Callable[[], None],
    step_id: int,
    actor: Actor | None,
    message_id: str | None = None,
) -> ControlResult:
    """``Controls.approve``'s body: a step parked on its approval request goes back to pending,
    due now, approved by ``actor``, and its run is woken. Anything else is refused and nothing
    changes: a second Approve (already approved, and by whom), a skipped or cancelled step, a
    cue, or (``message_id``) a button on another message than the step's request."""
    result = await _approve(engine, clock.now(), step_id, actor, message_id)
    if result.ok:
        changed()
    return result


@retry_on_conflict
async def _approve(
    engine: AsyncEngine, now: dt.datetime, step_id: int, actor: Actor | None, message_id: str | None
) -> ControlResult:
    if not _names_a_row(step_id):
        return refused_step(Control.APPROVE, None, step_id, None)
    async with engine.begin() as conn:
        step = await steps_sql.get(conn, step_id)
        if step is None:
            return refused_step(Control.APPROVE, None, step_id, None)
        run_id = step.run_id
        run = await runs_sql.get(conn, run_id)
        ref = CueRef(step_id, run_id, step.status, step.result, settled_by=step.settled_by)
        if step.approved_at is not None:
            who = _approver(step)
            return ControlResult(
                False, Control.APPROVE, Reason.ALREADY_APPROVED, run_id=run_id, step_id=step_id, by=who
            )
        if not awaiting(step):
            if step.status in (StepStatus.RUNNING, StepStatus.PENDING):
                return ControlResult(False, Control.APPROVE, Reason.NOT_AWAITING_APPROVAL, step_id=step_id)
            return refused_step(Control.APPROVE, step, step_id, run, run_id=run_id, cues=(ref,))
        posted = (step.result or {}).get("posted")
        if (
            message_id is not None
            and isinstance(posted, dict)
            and str(posted.get("message_id")) != message_id
        ):
            return ControlResult(False, Control.APPROVE, Reason.OTHER_CUE_MESSAGE, step_id=step_id)
        # Still where the card went, no longer asking: an action that answers nothing keeps it.
        result = {**(step.result or {}), "approval": APPROVED}
        if not await step_settles.approve_parked(conn, step_id, now, actor=actor, result=result):
            again = await steps_sql.get(conn, step_id)
            return refused_step(Control.APPROVE, again, step_id, run, run_id=run_id, cues=(ref,))
        risk = str((step.result or {}).get("risk", ""))
        await record(conn, run_id, StepApproved(step.action_id, risk), now, step_id=step_id, actor=actor)
        await run_leases.wake_now(conn, run_id, now)
    return ControlResult(
        True,
        Control.APPROVE,
        Reason.APPROVED,
        run_id=run_id,
        step_id=step_id,
        cues=(CueRef(step_id, run_id, StepStatus.PENDING, result, settled_by=actor),),
        run_status=run.status if run is not None else None,
    )


async def skip(
    controls: Controls, step_id: int, actor: Actor | None, message_id: str | None
) -> ControlResult:
    """Skip on an approval card: ``Controls.skip`` of the step, only while it is parked on its
    request (posted as ``message_id``), so a copied custom id skips no cue and no pending step."""
    if _names_a_row(step_id):
        async with controls.engine.connect() as conn:
            step = await steps_sql.get(conn, step_id)
        if (
            step is not None
            and step.status in (StepStatus.PENDING, StepStatus.RUNNING)
            and not awaiting(step)
        ):
            return ControlResult(False, Control.SKIP, Reason.NOT_AWAITING_APPROVAL, step_id=step_id)
        posted = (step.result or {}).get("posted") if step is not None else None
        if (
            message_id is not None
            and isinstance(posted, dict)
            and str(posted.get("message_id")) != message_id
        ):
            return ControlResult(False, Control.SKIP, Reason.OTHER_CUE_MESSAGE, step_id=step_id)
    return await controls.skip(step_id, actor=actor, parked_only=True)
