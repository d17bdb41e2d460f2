"""``core.wait`` (actions/core.py): a wait never sleeps, it answers ``holdFor`` at once, and its
duration is read as seconds or as text, within (0 s, 7 days]."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from actions.core import WaitParams, wait_action
from runner import dispatch
from runner.dispatch import MAX_HOLD_SECONDS
from runner.registry import ActionRegistry, Envelope


def envelope(params: dict[str, Any], *, verify: bool = False) -> Envelope:
    return Envelope(
        actor=None, idempotency_key="k" * 40, params=params, run_id=1, scope="", step_id=2, verify=verify
    )


@pytest.mark.parametrize(
    ("written", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("7d", 7 * 86400.0)],
)
def test_a_duration_is_seconds_or_text(written: Any, seconds: float) -> None:
    assert WaitParams(duration=written).duration == seconds


@pytest.mark.parametrize(
    ("written", "words"),
    [
        (0, "longer than zero"),
        (-5, "longer than zero"),
        (MAX_HOLD_SECONDS + 1, "at most 7 days"),
        ("8d", "at most 7 days"),
        (True, "a number of seconds or text"),
        (None, "a number of seconds or text"),
        ([60], "a number of seconds or text"),
        (float("nan"), "must be a number of seconds"),
        ("soon", "'soon' is not a duration"),
    ],
)
def test_a_duration_out_of_range_or_unreadable_is_refused(written: Any, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        WaitParams(duration=written)
    assert words in str(caught.value)


def test_params_other_than_duration_are_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        WaitParams.model_validate({"duration": 5, "durration": 6})


async def test_a_wait_answers_hold_for_at_once_and_sends_nothing() -> None:
    action = wait_action()
    answer = await action.perform(envelope({"duration": "2m"}), WaitParams(duration="2m"))
    assert answer == {"ok": True, "holdFor": 120.0}


async def test_dispatched_a_wait_holds_for_its_duration_and_a_bad_one_is_terminal() -> None:
    """Through the runner's dispatch (params parsed by the action's own model): a good wait is a
    success holding the next step; a bad one fails for good, since retrying cannot fix it."""
    registry = ActionRegistry()
    registry.register("core", [wait_action()])
    held = await dispatch.perform(registry, envelope({"duration": "90s"}), "core.wait")
    assert (held.outcome, held.hold_seconds) == ("done", 90.0)
    refused = await dispatch.perform(registry, envelope({"duration": 0}), "core.wait")
    assert refused.outcome == "terminal" and "core.wait params invalid" in (refused.error or "")
