"""``core.wait``: hold the next step (or the next phase) for a while.

A wait does not sleep: it answers at once with ``holdFor``, and the runner sets the next pending
step's due time, so the wait survives restarts and costs nothing while it lasts.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.definitions import duration_seconds
from runner.definitions.durations import UNITS
from runner.dispatch import MAX_HOLD_SECONDS
from runner.registry import Action, Envelope
from runner.states import AnswerKey


class WaitParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    duration: float = Field(description="seconds, or text like '90s', '5m', '1h30m', '2d'")

    @field_validator("duration", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> float:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ValueError(f"a duration is a number of seconds or text like '5m', '1h30m' or '2d': {UNITS}")
        seconds = duration_seconds(value)
        if math.isnan(seconds):
            raise ValueError("a duration must be a number of seconds")
        if seconds <= 0:
            raise ValueError("a wait must be longer than zero")
        if seconds > MAX_HOLD_SECONDS:
            raise ValueError("a wait may last at most 7 days")
        return seconds


async def _wait(envelope: Envelope, params: WaitParams) -> dict[str, Any]:
    return {AnswerKey.OK: True, AnswerKey.HOLD_FOR: params.duration}


def wait_action() -> Action[WaitParams]:
    return Action(
        id="core.wait",
        label="Wait",
        risk="none",
        reversible="none",
        version=1,
        budget_ms=1000,
        params_model=WaitParams,
        perform=_wait,
        description="Holds whatever comes next (the next step, or the next phase) for a duration.",
    )
