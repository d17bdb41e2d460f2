"""The rehearsal's account of a run, read back from the run log: what the runner did, printed
after each tick rather than guessed at."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from rehearsal.console import Console, format_duration, format_offset, run_label
from runner import views


def show_line(console: Console, view: views.RunView, line: dict[str, Any]) -> None:
    """One run-log line, as the rehearsal prints it."""
    kind = line["kind"]
    detail = line["detail"] or {}
    label = run_label(view.id, view.scope)
    base = {"event": kind, "run_id": view.id, "scope": view.scope, "actor": line["actor"]}
    if kind.startswith("step."):
        _show_step_line(console, view, line, detail, label, base)
    elif kind == "run.created":
        mode = "rehearsal run" if detail.get("rehearsal") else "LIVE run"
        console.emit(
            "status",
            f"{label}: created ({mode})",
            **base,
            to="scheduled",
            rehearsal=detail.get("rehearsal"),
        )
    elif kind == "run.status":
        before, after = detail.get("from"), detail.get("to")
        why = detail.get("error") or detail.get("reason") or detail.get("control")
        moved = f"{before} → {after}" if before else f"now {after}"
        text = f"{label}: {moved}" + (f" ({why})" if why else "")
        console.emit(
            "status",
            text,
            **base,
            **{"from": before, "to": after},
            reason=detail.get("reason"),
            error=detail.get("error"),
        )
    elif kind in ("phase.started", "phase.completed"):
        key = detail.get("phase")
        phase = next((p for p in view.phases if p.key == key), None)
        title = f" ({phase.label})" if phase else ""
        verb = "started" if kind == "phase.started" else "completed"
        console.emit("phase", f"{label}: phase {key!r}{title} {verb}", **base, phase=key)
    elif kind == "run.blocked":
        text = f"{label}: waiting, concurrency key {detail.get('key')!r} is held by run {detail.get('holder_run_id')}"
        console.emit("status", text, **base, blocked_by=detail.get("holder_run_id"), key=detail.get("key"))
    elif kind == "run.degraded":
        text = f"{label}: health → degraded ({detail.get('reason')})"
        console.emit("status", text, **base, health="degraded", reason=detail.get("reason"))
    else:
        console.emit("status", f"{label}: {kind} {json.dumps(detail, default=str)}", **base, detail=detail)


def _show_step_line(
    console: Console,
    view: views.RunView,
    line: dict[str, Any],
    detail: dict[str, Any],
    label: str,
    base: dict[str, Any],
) -> None:
    kind = line["kind"]
    outcome = kind.removeprefix("step.")
    step = next((s for p in view.phases for s in p.steps if s.id == line["step_id"]), None)
    name = f"{step.phase} step {step.seq} ({step.label})" if step else f"step {line['step_id']}"
    record = {
        **base,
        "outcome": outcome,
        "step_id": line["step_id"],
        "phase": step.phase if step else None,
        "index": step.seq if step else None,
        "label": step.label if step else None,
        "action": step.action_id if step else detail.get("action"),
        "attempts": detail.get("attempts"),
        "error": detail.get("error"),
    }
    text = f"{label}: {name} {outcome}"
    if outcome == "done" and detail.get("hold_until"):
        until = dt.datetime.fromisoformat(detail["hold_until"])
        held = (until - line["at"]).total_seconds()
        text += (
            f"; what comes next waits {format_duration(held)} (until {format_offset(console.elapsed(until))})"
        )
        record["hold_until"] = detail["hold_until"]
    elif outcome == "parked":
        text = f"{label}: {name} is waiting for a GM to confirm or skip"
    elif outcome == "retry":
        due = dt.datetime.fromisoformat(detail["due_at"]) if detail.get("due_at") else None
        when = f"; retrying at {format_offset(console.elapsed(due))}" if due else ""
        text = f"{label}: {name} failed (attempt {detail.get('attempts')}): {detail.get('error')}{when}"
        record["due_at"] = detail.get("due_at")
    elif outcome == "failed":
        text = f"{label}: {name} FAILED: {detail.get('error')}"
    elif outcome in ("confirmed", "skipped") and line["actor"]:
        text += f" by {line['actor']}"
    console.emit("step", text, **record)
