"""The action registry: the verbs a step may name.

Modules register actions through a staging area that checks each entry's shape before any of
them is applied, so an action that would not register is never one the runner has to survive,
and a module with one malformed entry registers nothing rather than half of itself.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from runner.errors import RegistrationError

ACTION_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
RISKS = ("none", "notify", "moderate", "destructive")
REVERSIBLE = ("none", "manual", "automatic")

# An action's params model; its ``perform`` takes exactly that model, so a mismatch between the
# two is a type error where the action is built, not a surprise at dispatch.
P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class Envelope:
    """What an action is handed: exactly these seven fields, no more (seed §F)."""

    actor: str | None
    idempotency_key: str
    params: dict[str, Any]
    run_id: int
    scope: str
    step_id: int
    verify: bool


@dataclass(frozen=True)
class Action(Generic[P]):
    """One verb. ``perform(envelope, params)`` gets the envelope and the params already parsed
    by ``params_model``; it answers as ``runner.states.AnswerKey`` says. With ``envelope.verify``
    true it must check without acting and answer done, or a terminal failure listing its
    ``problems``.

    ``label`` names the action where a person chooses one (the known actions listed beside an
    unknown one); ``version`` is recorded on every step the action performs (``action_version``,
    as the seeds' steps carry it). ``risk`` and ``reversible`` are the seeds' shape, checked at
    registration: ``risk`` decides whether a step waits for a staff approval before it runs
    (``runner.approvals``), ``reversible`` what a cancel with cleanup undoes."""

    id: str
    label: str
    risk: str
    reversible: str
    version: int
    budget_ms: int
    params_model: type[P]
    perform: Callable[[Envelope, P], Awaitable[Any]]
    # Why a step of this action may be slow to settle; shown in status views.
    description: str = ""


@dataclass
class Staging:
    owner: str
    staged: list[Action[Any]] = field(default_factory=list)

    def register(self, actions: Iterable[Action[Any]]) -> None:
        self.staged.extend(actions)


def _problems(action: Any) -> list[str]:
    if not isinstance(action, Action):
        return [f"expected an Action, got {type(action).__name__}"]
    problems = []
    if not isinstance(action.id, str) or not ACTION_ID.match(action.id):
        problems.append(f"id {action.id!r} must look like 'module.verb' (lower case, dotted)")
    if not isinstance(action.label, str) or not action.label.strip():
        problems.append("label must be a non-empty string")
    if action.risk not in RISKS:
        problems.append(f"risk {action.risk!r} must be one of {', '.join(RISKS)}")
    if action.reversible not in REVERSIBLE:
        problems.append(f"reversible {action.reversible!r} must be one of {', '.join(REVERSIBLE)}")
    if not isinstance(action.version, int) or isinstance(action.version, bool) or action.version < 1:
        problems.append(f"version {action.version!r} must be a positive integer")
    if not isinstance(action.budget_ms, int) or isinstance(action.budget_ms, bool) or action.budget_ms <= 0:
        problems.append(f"budget_ms {action.budget_ms!r} must be a positive integer")
    if not (isinstance(action.params_model, type) and issubclass(action.params_model, BaseModel)):
        problems.append("params_model must be a pydantic model class")
    if not inspect.iscoroutinefunction(action.perform):
        problems.append("perform must be an async function")
    return problems


class ActionRegistry:
    def __init__(self) -> None:
        self._actions: dict[str, Action[Any]] = {}
        # Which module (a staging's owner) registered each action, for listings.
        self._owners: dict[str, str] = {}
        # The problems of the modules ``offer`` refused: reported (health, the start-up log), not
        # raised, since the deployment runs without them.
        self.refused: list[str] = []

    def stage(self, owner: str) -> Staging:
        return Staging(owner)

    def apply(self, staging: Staging) -> None:
        """Check every staged entry; apply all of them or none."""
        problems: list[str] = []
        seen: set[str] = set()
        for index, action in enumerate(staging.staged):
            name = getattr(action, "id", f"#{index}")
            problems.extend(f"{staging.owner}: action {name}: {p}" for p in _problems(action))
            if isinstance(action, Action):
                if action.id in seen:
                    problems.append(f"{staging.owner}: action {action.id}: registered twice in one module")
                elif action.id in self._actions:
                    problems.append(
                        f"{staging.owner}: action {action.id}: already registered by another module"
                    )
                seen.add(action.id)
        if problems:
            raise RegistrationError(problems)
        for action in staging.staged:
            self._actions[action.id] = action
            self._owners[action.id] = staging.owner

    def offer(self, staging: Staging) -> bool:
        """``apply``, for a module the registry can do without (a plugin): refused, it registers
        nothing and its problems are kept in ``refused`` instead of raised."""
        try:
            self.apply(staging)
        except RegistrationError as exc:
            self.refused.extend(exc.problems)
            return False
        return True

    def register(self, owner: str, actions: Iterable[Action[Any]]) -> None:
        staging = self.stage(owner)
        staging.register(actions)
        self.apply(staging)

    def get(self, action_id: str) -> Action[Any] | None:
        return self._actions.get(action_id)

    def __contains__(self, action_id: str) -> bool:
        return action_id in self._actions

    def ids(self) -> list[str]:
        return sorted(self._actions)

    def owner(self, action_id: str) -> str | None:
        """The module that registered ``action_id`` (its staging's owner)."""
        return self._owners.get(action_id)

    def actions(self) -> list[Action[Any]]:
        """Every action, sorted by id."""
        return [self._actions[i] for i in self.ids()]

    def described(self) -> list[str]:
        """Every action as ``id (label)``, sorted by id: what a person picks from."""
        return [f"{a.id} ({a.label})" for a in sorted(self._actions.values(), key=lambda a: a.id)]

    def max_budget_ms(self) -> int:
        return max((a.budget_ms for a in self._actions.values()), default=1000)
