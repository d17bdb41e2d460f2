"""The state machines in ``runner.states`` are the design's (../shared/DESIGN.md), and
``lifecycle.move_run`` refuses, before touching the database, an edge they do not draw."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TypeVar

import pytest

from runner.lifecycle import move_run
from runner.schema import runs, steps
from runner.states import (
    RUN_IN_FLIGHT,
    RUN_TERMINAL,
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    RunStatus,
    StepStatus,
    run_may_move,
    step_may_move,
)

R, S = RunStatus, StepStatus
T = TypeVar("T")

# Every edge the design's run table draws ("any in flight -> cancelled" spelled out), plus the
# one it is silent on that the runner needs: a step failing with abort_run while its run is
# paused (the reclaim's give-up, or a dispatch that was out when the pause was pressed).
DESIGN_RUN_EDGES = {
    (R.SCHEDULED, R.MISSED),
    (R.SCHEDULED, R.STARTING),
    (R.STARTING, R.RUNNING),
    (R.RUNNING, R.RUNNING),
    (R.RUNNING, R.ENDING),
    (R.ENDING, R.COMPLETED),
    (R.RUNNING, R.PAUSED),
    (R.PAUSED, R.RUNNING),
    (R.RUNNING, R.FAILED),
    *((status, R.CANCELLED) for status in RUN_IN_FLIGHT),
}
DESIGN_STEP_EDGES = {
    (S.PENDING, S.RUNNING),  # the claim
    (S.RUNNING, S.DONE),
    (S.RUNNING, S.RUNNING),  # leased -> parked
    (S.RUNNING, S.PENDING),  # transient failure, or the reclaim handing back
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.SKIPPED),  # a parked cue skipped
    (S.PENDING, S.SKIPPED),
    (S.FAILED, S.PENDING),  # the retry control
    (S.PENDING, S.CANCELLED),
    (S.RUNNING, S.CANCELLED),
}


def _edges(table: Mapping[T, frozenset[T]]) -> set[tuple[T, T]]:
    return {(a, b) for a, tos in table.items() for b in tos}


def test_every_run_edge_the_design_draws_is_allowed_and_nothing_else_but_paused_to_failed() -> None:
    assert _edges(RUN_TRANSITIONS) == DESIGN_RUN_EDGES | {(R.PAUSED, R.FAILED)}
    assert all(run_may_move(a, b) for a, b in DESIGN_RUN_EDGES)


def test_every_step_edge_the_design_draws_is_allowed_and_nothing_else() -> None:
    assert _edges(STEP_TRANSITIONS) == DESIGN_STEP_EDGES
    assert all(step_may_move(a.value, b.value) for a, b in DESIGN_STEP_EDGES)


@pytest.mark.parametrize(
    ("from_", "to"),
    [(R.COMPLETED, R.RUNNING), (R.SCHEDULED, R.RUNNING), (R.PAUSED, R.ENDING), (R.MISSED, R.SCHEDULED)],
)
def test_edges_the_design_does_not_draw_are_refused(from_: RunStatus, to: RunStatus) -> None:
    assert not run_may_move(from_, to)


def test_a_terminal_status_goes_nowhere_and_a_settled_step_only_back_from_failed() -> None:
    assert all(not RUN_TRANSITIONS[status] for status in RUN_TERMINAL)
    assert (
        not STEP_TRANSITIONS[S.DONE] and not STEP_TRANSITIONS[S.SKIPPED] and not STEP_TRANSITIONS[S.CANCELLED]
    )
    assert not step_may_move(S.DONE, S.PENDING)


def test_the_enums_are_the_stored_strings_the_schema_allows() -> None:
    assert list(runs.c.status.type.enums) == [status.value for status in RunStatus]  # type: ignore[attr-defined]
    assert list(steps.c.status.type.enums) == [status.value for status in StepStatus]  # type: ignore[attr-defined]
    assert RunStatus("running") == "running"


@pytest.mark.parametrize(
    ("from_", "to"), [(R.COMPLETED, R.RUNNING), (R.RUNNING, R.RUNNING), ((R.ENDING, R.PAUSED), R.COMPLETED)]
)
async def test_move_run_refuses_an_edge_before_touching_the_database(
    from_: RunStatus | tuple[RunStatus, ...], to: RunStatus
) -> None:
    """running -> running is a phase move (``enter_phase``), not a status change with a line."""
    with pytest.raises(ValueError, match="no run moves"):
        await move_run(None, 1, from_, to, dt.datetime(2026, 1, 1))  # type: ignore[arg-type]
