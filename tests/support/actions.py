"""The one builder of test actions (the seeds' ``scriptedAction``), shared by the tests and the
benchmarks so that an ``Action`` field added to the registry is filled in one place.

``build_action`` makes an action around any ``perform``; ``Scripted`` makes actions whose
answers each test dictates (``scripted["test.x"].answer = {...}``) and records every envelope.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from runner.registry import Action, Envelope


class AnyParams(BaseModel):
    """Params that accept anything: a test action checks nothing about what it is handed."""

    model_config = ConfigDict(extra="allow")


def build_action(
    action_id: str,
    perform: Callable[[Envelope, Any], Awaitable[Any]],
    *,
    budget_ms: int = 1000,
    params_model: type[BaseModel] = AnyParams,
    risk: str = "notify",
    label: str | None = None,
    version: int = 1,
) -> Action:
    return Action(
        id=action_id,
        label=label or action_id,
        risk=risk,
        reversible="none",
        version=version,
        budget_ms=budget_ms,
        params_model=params_model,
        perform=perform,
    )


async def ok(envelope: Envelope, params: BaseModel) -> dict[str, Any]:
    """An action that succeeds at once."""
    return {"ok": True}


@dataclass
class Script:
    """What one scripted action answers: ``answers`` in order, then ``answer`` for every call
    after; an answer that is callable is called with the envelope (to raise, or to block)."""

    calls: list[Envelope] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)
    answer: Any = None


class Scripted:
    """Actions whose answers the test sets: ``scripted["test.x"].answer = {...}``."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = defaultdict(Script)

    def __getitem__(self, action_id: str) -> Script:
        return self.scripts[action_id]

    def action(
        self,
        action_id: str,
        *,
        budget_ms: int = 1000,
        perform: Callable[[Envelope, Any], Awaitable[Any]] | None = None,
    ) -> Action:
        async def scripted(envelope: Envelope, params: BaseModel) -> Any:
            script = self.scripts[action_id]
            script.calls.append(envelope)
            answer = script.answers.pop(0) if script.answers else script.answer
            if callable(answer):
                return answer(envelope)
            return {"ok": True} if answer is None else answer

        return build_action(action_id, perform or scripted, budget_ms=budget_ms)
