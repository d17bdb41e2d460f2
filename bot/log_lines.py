"""The staff log's words: one line per run-log entry staff should be told of (started, blocked,
paused after a failure, cancelled, a reminder that did not go out, ...), and the packing of
lines into as few messages as Discord allows. ``bot.staff_log`` posts them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actions import limits
from bot.rendering import clip, person, run_name
from runner import history
from runner.definitions import shown_duration
from runner.states import RunStatus
from runner.views import RunView


def _step_label(run: RunView | None, step_id: Any) -> str:
    if run is None or step_id is None:
        return f"step {step_id}" if step_id is not None else "a step"
    for phase in run.phases:
        for step in phase.steps:
            if step.id == step_id:
                return f"step {step_id} ({clip(step.label, 80)})"
    return f"step {step_id}"


# The events ``log_line`` can word; every other kind is history staff need not be told.
# A reminder that went out is not posted (one line per reminder per occurrence is noise in a
# channel staff read for what needs them); one that did not go out is.
LOGGED_EVENTS: tuple[type[history.Event], ...] = (
    history.RunStatusChanged,
    history.RunBlocked,
    history.RunDegraded,
    history.RunStalled,
    history.RunRecovered,
    history.ReminderSkipped,
    history.ReminderFailed,
    history.RunRepointed,
)


def _lead(before: float | None) -> str:
    return f"the reminder {shown_duration(before)} before" if before else "a reminder"


def _reminder_skipped(skipped: history.ReminderSkipped, name: str) -> str | None:
    match skipped.reason:
        case history.ReminderSkip.LATE:
            late = shown_duration(skipped.late_seconds or 0)
            return f"⏰ {name}: {_lead(skipped.before)} was not sent: its moment passed {late} ago (was the bot down?)"
        case history.ReminderSkip.RUN_STARTED:
            return f"⏰ {name}: {_lead(skipped.before)} was not sent: the event started first"
    return None  # dropped by a new version: the run's re-point line says so


def _stalled_reason(stalled: history.RunStalled, run: RunView | None) -> str:
    if stalled.reason is history.StallReason.RECLAIMED:
        step = _step_label(run, stalled.step_id)
        return f"a runner died holding {step} {stalled.reclaims} times (is the bot crash-looping?)"
    overdue = int(stalled.overdue_seconds or 0) // 60
    return f"nobody has advanced it for {overdue} minutes past when it was due"


def log_line(entry: history.Entry, run: RunView | None) -> str | None:
    """One human line for the staff log, or ``None`` for history staff need not be told."""
    name = run_name(run.title, run.scope, entry.run_id, run.rehearsal) if run else f"run {entry.run_id}"
    match entry.event:
        case history.RunBlocked(key=key, holder_run_id=holder):
            return f"⏳ {name} is waiting: run {holder} holds `{key}`"
        case history.RunDegraded(reason=reason):
            return f"⚠️ {name} is degraded: {clip(reason, 300)}"
        case history.RunStalled() as stalled:
            return f"🛑 {name} is stalled: {_stalled_reason(stalled, run)}"
        case history.RunRecovered(to=to):
            return f"▶️ {name} is moving again (health {to})"
        case history.ReminderSkipped() as skipped:
            return _reminder_skipped(skipped, name)
        case history.ReminderFailed(error=error, before=before):
            return f"⚠️ {name}: {_lead(before)} could not be sent: {clip(error, 300)}"
        case history.RunRepointed(version=version):
            return f"📝 {name} will run version {version} of its event, published since it was scheduled"
        case history.RunStatusChanged() as moved:
            return _status_line(moved, entry, run, name)
    return None


def _by_schedule(actor: object) -> bool:
    """The tick starts scheduled runs as the actor named ``schedule`` (no person to mention)."""
    return actor is None or getattr(actor, "name", actor) == "schedule"


def _status_line(
    moved: history.RunStatusChanged, entry: history.Entry, run: RunView | None, name: str
) -> str | None:
    actor = person(entry.actor) if entry.actor else "staff"
    match moved.to:
        case RunStatus.STARTING:
            by = run.started_by if run else None
            return f"▶️ {name} started {'on schedule' if _by_schedule(by) else f'by {person(by)}'}"
        case RunStatus.MISSED:
            return f"⚠️ {name} was missed: it did not start within its grace window"
        case RunStatus.PAUSED if moved.control is None:
            # No control paused it: a step's ``on_failure: pause`` did.
            error = clip(moved.error or "", 400)
            return f"⏸️ {name} paused after {_step_label(run, entry.step_id)} failed: {error}"
        case RunStatus.PAUSED:
            return f"⏸️ {name} paused by {actor}"
        case RunStatus.RUNNING if moved.from_ is RunStatus.PAUSED:
            verb = "retried" if moved.control == "retry" else "resumed"
            return f"▶️ {name} {verb} by {actor}"
        case RunStatus.CANCELLED:
            return f"⏹️ {name} cancelled by {actor}: {clip(moved.reason or '', 300)}"
        case RunStatus.COMPLETED:
            return f"✅ {name} completed"
        case RunStatus.FAILED:
            error = clip(moved.error or "", 400)
            return f"❌ {name} failed at {_step_label(run, entry.step_id)}: {error}"
    return None


def batch_lines(lines: Sequence[str], size: int = limits.CONTENT_MAX) -> list[str]:
    """Pack lines into as few messages as Discord's content limit allows."""
    messages: list[str] = []
    current = ""
    for line in lines:
        line = clip(line, size)
        if current and len(current) + 1 + len(line) > size:
            messages.append(current)
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        messages.append(current)
    return messages
