"""§F: no shape a failure can take reads as success (seed ``classify`` tests), and the registry's
shape check at registration."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from runner.dispatch import MAX_HOLD_SECONDS, classify
from runner.errors import RegistrationError
from runner.registry import Action, ActionRegistry


def test_classify_every_failure_shape_is_a_failure() -> None:
    """A missing, truthy or string ``ok`` is not a success; only ``ok: false, retry: false`` is
    terminal; everything else (and a timeout) retries."""
    assert classify(None, "a").outcome == "retry"
    assert classify("ok", "a").outcome == "retry"
    assert classify(["ok"], "a").outcome == "retry"
    assert classify({}, "a").outcome == "retry", "a missing ok is not a success"
    assert classify({"ok": "yes"}, "a").outcome == "retry", "ok must be true, not truthy"
    assert classify({"ok": 1}, "a").outcome == "retry", "1 is not True"
    assert classify({"ok": False}, "a").outcome == "retry"
    assert classify({"ok": False, "retry": False}, "a").outcome == "terminal"
    assert classify({"ok": False, "retry": 0}, "a").outcome == "retry", "only retry: false is terminal"
    assert classify({"__timedOut": True, "error": "slow"}, "a").outcome == "retry"
    assert classify({"__timedOut": True, "ok": True}, "a").outcome == "retry", "a timeout never reads as done"


def test_classify_the_two_success_shapes_that_are_not_finished() -> None:
    assert classify({"ok": True}, "a").outcome == "done"
    assert classify({"ok": True}, "a").hold_seconds == 0
    assert classify({"ok": True, "await": "human"}, "a").outcome == "parked"
    assert classify({"ok": True, "holdFor": 90}, "a").hold_seconds == 90
    assert classify({"ok": True, "holdFor": "90"}, "a").hold_seconds == 90
    assert classify({"ok": True, "holdFor": -1}, "a").outcome == "terminal", (
        "a bad holdFor is not a silent zero"
    )
    assert classify({"ok": True, "holdFor": "soon"}, "a").outcome == "terminal"
    assert classify({"ok": True, "holdFor": True}, "a").outcome == "terminal", (
        "a bool is not a number of seconds"
    )
    assert classify({"ok": True, "holdFor": float("nan")}, "a").outcome == "terminal"
    assert classify({"ok": True, "holdFor": 1e12}, "a").hold_seconds <= 7 * 24 * 60 * 60, "holdFor is bounded"
    assert classify({"ok": True, "holdFor": float("inf")}, "a").hold_seconds == MAX_HOLD_SECONDS


def test_classify_names_the_action_in_its_errors() -> None:
    assert "relay.x" in (classify("nope", "relay.x").error or "")
    assert classify({"ok": False, "retry": False, "error": "gone"}, "a").error == "gone"


class NoParams(BaseModel):
    pass


async def _perform(envelope: object, params: object) -> dict[str, bool]:
    return {"ok": True}


def _action(**over: object) -> Action:
    values: dict[str, object] = {
        "id": "test.ok",
        "label": "ok",
        "risk": "notify",
        "reversible": "none",
        "version": 1,
        "budget_ms": 1000,
        "params_model": NoParams,
        "perform": _perform,
    }
    values.update(over)
    return Action(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("id", "NoDots", "id"),
        ("label", " ", "label"),
        ("risk", "spicy", "risk"),
        ("reversible", "maybe", "reversible"),
        ("version", 0, "version"),
        ("budget_ms", 0, "budget_ms"),
        ("params_model", dict, "params_model"),
        ("perform", lambda e, p: None, "perform"),
    ],
)
def test_a_malformed_action_does_not_register_and_says_which_field(
    field: str, value: object, said: str
) -> None:
    """The shape check at registration: an action that would not register is never one the
    runner has to survive; the module registers nothing rather than half of itself."""
    registry = ActionRegistry()
    staging = registry.stage("module.x")
    staging.register([_action(id="test.good"), _action(**{field: value})])
    with pytest.raises(RegistrationError) as raised:
        registry.apply(staging)
    assert said in str(raised.value)
    assert "module.x" in str(raised.value)
    assert "test.good" not in registry, "all or nothing"


def test_two_modules_cannot_register_one_id() -> None:
    registry = ActionRegistry()
    registry.register("a", [_action()])
    with pytest.raises(RegistrationError, match="already registered"):
        registry.register("b", [_action()])


def test_the_registry_names_each_action_by_id_and_label() -> None:
    """``label`` was validated and never read; it is what an author sees beside each id when a
    step names an action nobody registered."""
    registry = ActionRegistry()
    registry.register("m", [_action(id="test.b", label="Bee"), _action(id="test.a", label="Ay")])
    assert registry.described() == ["test.a (Ay)", "test.b (Bee)"]
