"""The staff log's lines for every piece of run history staff are told about."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from bot.rendering import log_line
from runner.views import PhaseView, RunView, StepView

T0 = dt.datetime(2026, 1, 1)
STEP = StepView(
    7, "main", 0, "Call to arms", "discord.announce", "failed", False, None, 3, "boom", None, None
)
RUN = RunView(
    3, "raid", "Harbour Raid", "north", "paused", "ok", False, "main", T0, T0, None,
    "mod (123456789012345678)", None, 1, [PhaseView("main", "Main", True, [STEP])],
)  # fmt: skip


def entry(kind: str, actor: str | None = None, step_id: int | None = None, **detail: Any) -> dict[str, Any]:
    return {
        "id": 1,
        "run_id": 3,
        "step_id": step_id,
        "kind": kind,
        "actor": actor,
        "detail": detail,
        "at": T0,
    }


NAME = "**Harbour Raid** (north) · run 3"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            entry("run.status", **{"from": "scheduled", "to": "starting"}),
            f"▶️ {NAME} started by <@123456789012345678>",
        ),
        (
            entry("run.blocked", key="harbour", holder_run_id=2),
            f"⏳ {NAME} is waiting: run 2 holds `harbour`",
        ),
        (entry("run.status", to="missed"), f"⚠️ {NAME} was missed: it did not start within its grace window"),
        (
            entry("run.status", step_id=7, to="paused", reason="step failed", error="Discord said no"),
            f"⏸️ {NAME} paused after step 7 (Call to arms) failed: Discord said no",
        ),
        (
            entry("run.status", "mod (123456789012345678)", to="paused", control="pause"),
            f"⏸️ {NAME} paused by <@123456789012345678>",
        ),
        (
            entry("run.status", "cli", **{"from": "paused", "to": "running", "control": "resume"}),
            f"▶️ {NAME} resumed by cli",
        ),
        (
            entry("run.status", "cli", to="cancelled", control="cancel", reason="storm"),
            f"⏹️ {NAME} cancelled by cli: storm",
        ),
        (entry("run.status", to="completed"), f"✅ {NAME} completed"),
        (
            entry("run.status", step_id=7, to="failed", reason="step failed", error="gone"),
            f"❌ {NAME} failed at step 7 (Call to arms): gone",
        ),
        (
            entry("run.degraded", reason="step 7 is being retried"),
            f"⚠️ {NAME} is degraded: step 7 is being retried",
        ),
        (entry("step.done"), None),
        (entry("run.status", to="running", **{"from": "starting"}), None),
    ],
)
def test_each_kind_of_history_has_its_line(line: dict[str, Any], expected: str | None) -> None:
    assert log_line(line, RUN) == expected


def test_a_rehearsal_is_marked() -> None:
    rehearsal = RunView(**{**RUN.__dict__, "rehearsal": True})
    assert log_line(entry("run.status", to="completed"), rehearsal) == f"✅ [REHEARSAL] {NAME} completed"
