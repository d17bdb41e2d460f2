"""A run's last error as people read it: a failed step named by its id with its label, the way
``runner.views.step_name`` names it everywhere else; every other error as it was written."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from runner.views import PhaseView, RunView, StepView
from wiring.run_text import failed_step, last_error_text

T0 = dt.datetime(2026, 1, 1)
GATES = StepView(
    5, "main", 0, "Open the gates", "discord.announce", "failed", False, None, 1, "no", None, None
)
RUN = RunView(
    3, "raid", "Harbour Raid", "", "paused", "degraded", False, "main", T0, T0, None, None,
    "step 5 (discord.announce) failed: Missing Access\nsecond line", 1, [PhaseView("main", "Main", True, [GATES])],
)  # fmt: skip


def test_a_failed_step_is_named_with_its_label_and_the_error_kept_whole() -> None:
    assert failed_step(RUN) == GATES
    assert last_error_text(RUN) == "step 5 (Open the gates) failed: Missing Access\nsecond line"


@pytest.mark.parametrize(
    "error",
    [
        None,
        "paused by alice",
        "cancelled by cli: storm",
        "missed: not started within its grace window",
        # A step this run does not hold is not guessed at.
        "step 9 (discord.announce) failed: gone",
    ],
)
def test_any_other_error_is_shown_as_it_was_written(error: str | None) -> None:
    run = dataclasses.replace(RUN, last_error=error)
    assert failed_step(run) is None
    assert last_error_text(run) == error


def test_a_pruned_run_says_its_history_was_pruned_and_how_its_steps_and_reminders_ended() -> None:
    from runner.views import PrunedRun
    from wiring.run_text import pruned_text

    assert pruned_text(RUN) is None
    pruned = dataclasses.replace(
        RUN,
        status="completed",
        phases=[],
        pruned=PrunedRun({"done": 4, "skipped": 1}, {"done": 2}, 14, True),
    )
    assert pruned_text(pruned) == (
        "Its steps and run log were pruned after the retention period: "
        "5 steps (4 done, 1 skipped); 2 reminders (2 sent)."
    )
    bare = dataclasses.replace(pruned, pruned=PrunedRun({}, {}, 0, False))
    assert pruned_text(bare) == "Its steps and run log were pruned after the retention period."
