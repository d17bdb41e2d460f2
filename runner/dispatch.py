"""Calling an action and reading its answer.

The answer protocol is the seeds' (§F), kept as plain dicts; its keys, and the shape each
outcome takes, are ``runner.states.AnswerKey``'s.

**No shape a failure can take reads as success**: only ``ok is True`` succeeds; a missing,
truthy or string ``ok`` is a failure; a ``holdFor`` that is not a non-negative number is a
terminal failure rather than a silent zero.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from runner.registry import Action, ActionRegistry, Envelope
from runner.states import AWAIT_HUMAN, ActionOutcome, AnswerKey

log = logging.getLogger(__name__)

MAX_HOLD_SECONDS = 7 * 24 * 60 * 60

Outcome = ActionOutcome


@dataclass(frozen=True)
class Classified:
    outcome: Outcome
    hold_seconds: float = 0.0
    error: str | None = None
    # Whatever the action wants remembered on the step (e.g. where a cue was posted).
    output: dict[str, Any] | None = None
    # How to undo what it did, as answered (``runner.engine.cleanup.undo_from`` reads it).
    undo: Any = None


def _error_text(answer: dict[str, Any], fallback: str) -> str:
    error = answer.get(AnswerKey.ERROR)
    return str(error) if error else fallback


def _hold_seconds(value: Any) -> float | None:
    """A non-negative finite number (a numeric string counts); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float) or math.isnan(value) or value < 0:
        return None
    return float(min(value, MAX_HOLD_SECONDS))


def classify(answer: Any, action_id: str) -> Classified:
    """Turn whatever an action returned into one of four outcomes."""
    if not isinstance(answer, dict):
        return Classified(
            ActionOutcome.RETRY, error=f"{action_id} answered {type(answer).__name__}, not a result"
        )
    output = answer.get(AnswerKey.OUTPUT) if isinstance(answer.get(AnswerKey.OUTPUT), dict) else None
    if answer.get(AnswerKey.TIMED_OUT):
        return Classified(ActionOutcome.RETRY, error=_error_text(answer, f"{action_id} timed out"))
    if answer.get(AnswerKey.OK) is not True:
        if answer.get(AnswerKey.OK) is False and answer.get(AnswerKey.RETRY) is False:
            return Classified(
                ActionOutcome.TERMINAL, error=_error_text(answer, f"{action_id} failed"), output=output
            )
        return Classified(
            ActionOutcome.RETRY, error=_error_text(answer, f"{action_id} did not answer ok"), output=output
        )
    if answer.get(AnswerKey.AWAIT) == AWAIT_HUMAN:
        return Classified(ActionOutcome.PARKED, output=output)
    if answer.get(AnswerKey.HOLD_FOR) is not None:
        hold = _hold_seconds(answer[AnswerKey.HOLD_FOR])
        if hold is None:
            return Classified(
                ActionOutcome.TERMINAL,
                error=f"{action_id} answered holdFor={answer[AnswerKey.HOLD_FOR]!r}, not a number of seconds",
            )
        return Classified(
            ActionOutcome.DONE, hold_seconds=hold, output=output, undo=answer.get(AnswerKey.UNDO)
        )
    return Classified(ActionOutcome.DONE, output=output, undo=answer.get(AnswerKey.UNDO))


async def perform(registry: ActionRegistry, envelope: Envelope, action_id: str) -> Classified:
    """Dispatch one step. Never raises: every failure becomes an outcome."""
    action = registry.get(action_id)
    if action is None:
        # Terminal at once and never a silent skip: the step names a module nobody loaded.
        return Classified(
            ActionOutcome.TERMINAL,
            error=f"no action named {action_id!r} is registered (is its module loaded?)",
        )
    try:
        params = action.params_model.model_validate(envelope.params)
    except ValidationError as exc:
        return Classified(ActionOutcome.TERMINAL, error=f"{action_id} params invalid: {_short(exc)}")
    return await _call(action, envelope, params)


async def _call(action: Action[Any], envelope: Envelope, params: Any) -> Classified:
    try:
        async with asyncio.timeout(action.budget_ms / 1000):
            answer = await action.perform(envelope, params)
    except TimeoutError:
        return classify(
            {
                AnswerKey.TIMED_OUT: True,
                AnswerKey.ERROR: f"{action.id} exceeded its budget of {action.budget_ms} ms",
            },
            action.id,
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning(
            "action %s raised during step %s of run %s",
            action.id,
            envelope.step_id,
            envelope.run_id,
            exc_info=True,
            extra={"run_id": envelope.run_id, "step_id": envelope.step_id},
        )
        return Classified(ActionOutcome.RETRY, error=f"{action.id} raised {type(exc).__name__}: {exc}"[:500])
    return classify(answer, action.id)


def _short(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}" for err in exc.errors()
    )[:400]
