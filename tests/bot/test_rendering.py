"""The staff log's lines for every piece of run history staff are told about."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from bot.cogs.staff_log._lines import log_line
from runner.history import Actor, Entry, parse_event
from runner.views import PhaseView, RunView, StepView

T0 = dt.datetime(2026, 1, 1)
STEP = StepView(
    7, "main", 0, "Call to arms", "discord.announce", "failed", False, None, 3, "boom", None, None
)
RUN = RunView(
    3, "raid", "Harbour Raid", "north", "paused", "ok", False, "main", T0, T0, None,
    Actor("123456789012345678", "mod"), None, 1, [PhaseView("main", "Main", True, [STEP])],
)  # fmt: skip


def entry(kind: str, actor: Actor | None = None, line_step: int | None = None, **detail: Any) -> Entry:
    """A line as the one reader hands it over: the stored detail parsed into its typed event."""
    return Entry(1, 3, line_step, T0, actor, kind, parse_event(kind, detail))


MOD = Actor("123456789012345678", "mod")
CLI = Actor(None, "cli")


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
            f"⏳ {NAME} is waiting: run 2 is using `harbour` (one run at a time)",
        ),
        (entry("run.status", to="missed"), f"⚠️ {NAME} was missed: it did not start within its grace window"),
        (
            entry("run.status", line_step=7, to="paused", reason="step failed", error="Discord said no"),
            f"⏸️ {NAME} paused after step 7 (Call to arms) failed: Discord said no",
        ),
        (
            entry("run.status", MOD, to="paused", control="pause"),
            f"⏸️ {NAME} paused by <@123456789012345678>: nothing new starts until it is resumed"
            " (a step already under way finishes)",
        ),
        (
            entry("run.status", CLI, **{"from": "paused", "to": "running", "control": "resume"}),
            f"▶️ {NAME} resumed by cli",
        ),
        # The retry's own line is the step's requeue (below): which step, by whom, and why.
        (entry("run.status", MOD, **{"from": "paused", "to": "running", "control": "retry"}), None),
        (
            entry("step.requeued", MOD, line_step=7, previous_error="Discord said no"),
            f"🔁 {NAME}: step 7 (Call to arms) retried by <@123456789012345678> (it had failed: Discord said no)",
        ),
        (
            entry("step.confirmed", MOD, line_step=7, note=None),
            f"☑️ {NAME}: step 7 (Call to arms) confirmed by <@123456789012345678>",
        ),
        (
            entry("step.skipped", MOD, line_step=7, note="gates jammed"),
            f"⏭️ {NAME}: step 7 (Call to arms) skipped by <@123456789012345678> — “gates jammed”",
        ),
        (
            entry(
                "step.retry",
                line_step=7,
                attempts=1,
                error="Discord answered 500",
                due_at="2026-01-01T00:00:30",
            ),
            f"🔁 {NAME}: step 7 (Call to arms) failed (attempt 1), trying again <t:1767225630:R>: Discord answered 500",
        ),
        (
            entry("step.failed", line_step=7, error="Missing Access", action="discord.announce", attempts=3),
            f"❌ {NAME}: step 7 (Call to arms) failed after 3 attempts: Missing Access; the run carries on past it",
        ),
        (
            entry("run.status", CLI, to="cancelled", control="cancel", reason="storm"),
            f"⏹️ {NAME} cancelled by cli: storm",
        ),
        (entry("run.status", to="completed"), f"✅ {NAME} completed"),
        (
            entry("run.status", line_step=7, to="failed", reason="step failed", error="gone"),
            f"❌ {NAME} failed at step 7 (Call to arms): gone",
        ),
        (
            entry("run.degraded", reason="step 7 is being retried"),
            f"⚠️ {NAME} is degraded: step 7 (Call to arms) is being retried",
        ),
        (
            entry("run.stalled", reason="reclaimed", step_id=7, reclaims=3, **{"from": "ok"}),
            f"🛑 {NAME} is stalled: a runner died holding step 7 (Call to arms) 3 times (is the bot crash-looping?)",
        ),
        (
            entry("run.stalled", reason="overdue", overdue_seconds=1800.5, **{"from": "degraded"}),
            f"🛑 {NAME} is stalled: nobody has advanced it for 30 minutes past when it was due",
        ),
        (
            entry("run.recovered", to="degraded"),
            f"▶️ {NAME} is moving again (still degraded: one of its steps failed or is being retried)",
        ),
        (entry("run.recovered", to="ok"), f"▶️ {NAME} is moving again"),
        (entry("step.done", action="discord.announce", attempts=1), None),
        (
            entry("reminder.skipped", reason="late", before=3600, late_seconds=2700),
            f"⏰ {NAME}: the reminder 1h before was not sent: its moment passed 45m ago (was the bot down?)",
        ),
        (
            entry("reminder.skipped", reason="run started", before=900),
            f"⏰ {NAME}: the reminder 15m before was not sent: the event started first",
        ),
        (entry("reminder.skipped", reason="republished", before=900), None),
        (
            entry("reminder.failed", error="Missing Access", attempts=3, before=900),
            f"⚠️ {NAME}: the reminder 15m before could not be sent: Missing Access",
        ),
        (
            entry("run.repointed", from_version_id=1, version_id=2, version=2),
            f"📝 {NAME} will run version 2 of its event, published since it was scheduled",
        ),
        # A reminder that went out is not worth a line in the staff channel.
        (entry("reminder.sent", before=900, starts_at="2026-01-01T20:00:00", attempts=1), None),
        # History is forever: a kind (or a field) this code does not know is simply not worded.
        (entry("run.renamed", to="Harbour Raid II"), None),
        (entry("run.status", to="completed", colour="green"), None),
        (entry("run.status", to="running", **{"from": "starting"}), None),
    ],
)
def test_each_kind_of_history_has_its_line(line: Entry, expected: str | None) -> None:
    assert log_line(line, RUN) == expected


def test_a_rehearsal_is_marked() -> None:
    rehearsal = RunView(**{**RUN.__dict__, "rehearsal": True})
    assert log_line(entry("run.status", to="completed"), rehearsal) == f"✅ [REHEARSAL] {NAME} completed"
