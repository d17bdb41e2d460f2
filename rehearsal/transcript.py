"""The rehearsal's account of a run, read back from the run log: what the runner did, printed
after each tick rather than guessed at.

It reads the history through its one reader (``runner.history.Entry``) and words each typed
event; a line this code does not know (``GenericEvent``) is printed as it was stored. A step is
named as every front end names it (``views.step_name``: its id, the number ``/event skip`` takes,
with its label). The engine's bookkeeping (status transitions, a step done that showed nothing
else, a phase closing) goes through ``Console.aside``: in the text only with ``-v``.
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from typing import Any

from bridge.listings import STATUS_OF_RUN, Desired
from rehearsal.console import Console, format_duration, format_offset, run_label
from runner import history, views
from runner.approvals import asks_approval
from runner.states import Health, RunStatus

# The step events, each printed as ``<step> <outcome>`` (``step.done`` -> ``done``).
STEP_EVENTS: tuple[type[history.Event], ...] = (
    history.StepDone,
    history.StepParked,
    history.StepRetry,
    history.StepFailed,
    history.StepCancelled,
    history.StepReclaimed,
    history.StepRequeued,
    history.StepConfirmed,
    history.StepSkipped,
    history.StepApproved,
)


def show_line(console: Console, view: views.RunView, entry: history.Entry) -> None:
    """One run-log line, as the rehearsal prints it."""
    label = run_label(view.id, view.scope)
    actor = entry.actor.name if entry.actor is not None else None
    base = {"event": entry.kind, "run_id": view.id, "scope": view.scope, "actor": actor}
    match entry.event:
        case event if isinstance(event, STEP_EVENTS):
            _show_step_line(console, view, entry, label, base)
        case history.RunCreated(rehearsal=rehearsal):
            mode = "rehearsal run" if rehearsal else "LIVE run"
            console.aside(
                "status", f"{label}: created ({mode})", **base, to=RunStatus.SCHEDULED, rehearsal=rehearsal
            )
        case history.RunStatusChanged() as moved:
            why = moved.error or moved.reason or moved.control
            shift = f"{moved.from_} → {moved.to}" if moved.from_ else f"now {moved.to}"
            console.aside(
                "status",
                f"{label}: {shift}" + (f" ({why})" if why else ""),
                **base,
                **{"from": moved.from_, "to": moved.to},
                reason=moved.reason,
                error=moved.error,
            )
        case history.PhaseStarted(phase=key) | history.PhaseCompleted(phase=key):
            phase = next((p for p in view.phases if p.key == key), None)
            title = f" ({phase.label})" if phase else ""
            text = f"{label}: phase {key!r}{title}"
            if isinstance(entry.event, history.PhaseStarted):
                console.emit("phase", f"{text} started", **base, phase=key)
            else:
                # The next phase's start says as much; the last one's end, the run's final line.
                console.aside("phase", f"{text} completed", **base, phase=key)
        case history.RunBlocked(key=key, holder_run_id=holder):
            text = f"{label}: waiting, concurrency key {key!r} is held by run {holder}"
            console.emit("status", text, **base, blocked_by=holder, key=key)
        case history.RunDegraded(reason=reason):
            # Always after a failure or a retry that was just shown with its reason.
            console.aside(
                "status",
                f"{label}: health → {Health.DEGRADED} ({reason})",
                **base,
                health=Health.DEGRADED,
                reason=reason,
            )
        case history.SignupPromoted() | history.SignupLateCancel() | history.SignupChangedByStaff():
            # ``--signups`` has shown each click and promotion as it happened.
            detail = entry.event.detail()
            console.aside(
                "signup", f"{label}: {entry.kind} {json.dumps(detail, default=str)}", **base, detail=detail
            )
        case _:
            detail = entry.event.detail()
            text = f"{label}: {entry.kind} {json.dumps(detail, default=str)}"
            console.emit("status", text, **base, detail=detail)


def _show_step_line(
    console: Console, view: views.RunView, entry: history.Entry, label: str, base: dict[str, Any]
) -> None:
    event = entry.event
    outcome = entry.kind.removeprefix("step.")
    step = next((s for p in view.phases for s in p.steps if s.id == entry.step_id), None)
    name = views.step_name(entry.step_id, step.label if step else None)
    # Fields more than one step event has (``attempts`` of done, retry, failed and reclaimed).
    attempts = getattr(event, "attempts", None)
    record = {
        **base,
        "outcome": outcome,
        "step_id": entry.step_id,
        "phase": step.phase if step else None,
        "index": step.seq if step else None,
        "label": step.label if step else None,
        "action": step.action_id if step else getattr(event, "action", None),
        "attempts": attempts,
        "error": getattr(event, "error", None),
    }
    text = f"{label}: {name} {outcome}"
    show = console.emit
    match event:
        case history.StepDone(hold_until=until) if until is not None:
            held = (until - entry.at).total_seconds()
            text += f"; what comes next waits {format_duration(held)} (until {format_offset(console.elapsed(until))})"
            record["hold_until"] = until.isoformat()
        case history.StepDone() | history.StepCancelled():
            # What the step sent is shown already; a cancelled one, by the run's final line.
            show = console.aside
        case history.StepParked() if step is not None and asks_approval(step.result):
            # Its action's risk holds it back: the wait is the point, so it is always shown.
            text = f"{label}: {name} is waiting for staff to approve or skip it"
        case history.StepParked():
            # The cue card was just shown, and the answer (or the prompt) comes next.
            text = f"{label}: {name} is waiting for a GM to confirm or skip"
            show = console.aside
        case history.StepRetry(due_at=due, error=error):
            when = f"; retrying at {format_offset(console.elapsed(due))}"
            text = f"{label}: {name} failed (attempt {attempts}): {error}{when}"
            record["due_at"] = due.isoformat()
        case history.StepFailed(error=error):
            text = f"{label}: {name} FAILED: {error}"
        case history.StepConfirmed() | history.StepSkipped() | history.StepApproved() if (
            entry.actor is not None
        ):
            text += f" by {entry.actor.name}"
        case history.StepSkipped(note=note) if note:
            # Skipped by its condition: the cue's answer it waited for did not come.
            text += f": {note}"
    show("step", text, **record)


def _clock(moment: dt.datetime, zone: str) -> str:
    local = moment.replace(tzinfo=dt.UTC).astimezone(zoneinfo.ZoneInfo(zone))
    return local.strftime("%a %d %b %Y %H:%M")


def show_listing(
    console: Console, view: views.RunView, entry: history.Entry, desired: Desired | None
) -> None:
    """What the server's Events tab would show for this run, were it live: the entry when the
    run is created, and each status the entry would move to. A rehearsal never creates one."""
    if desired is None:
        return
    label = run_label(view.id, view.scope)
    base = {"event": "listing", "run_id": view.id, "scope": view.scope}
    match entry.event:
        case history.RunCreated():
            end_local = desired.end.replace(tzinfo=dt.UTC).astimezone(zoneinfo.ZoneInfo(desired.zone))
            when = f"{_clock(desired.start, desired.zone)}–{end_local:%H:%M} {desired.zone}"
            if desired.zone != "UTC":
                when += f" ({desired.start:%H:%M}–{desired.end:%H:%M} UTC)"
            text = (
                f"{label}: Events tab (not created in a rehearsal): {desired.name!r}, {when}, "
                f"at {desired.location}"
            )
            console.emit(
                "listing",
                text,
                **base,
                name=desired.name,
                start=desired.start.isoformat() + "Z",
                end=desired.end.isoformat() + "Z",
                location=desired.location,
            )
        case history.RunStatusChanged(to=to) if to:
            shown = STATUS_OF_RUN.get(RunStatus(to))
            before = STATUS_OF_RUN.get(RunStatus(entry.event.from_)) if entry.event.from_ else None
            if shown is not None and shown != before:
                text = f"{label}: Events tab entry would be {shown.value} (not in a rehearsal)"
                console.aside("listing", text, **base, status=shown.value)


class WaitsBeforePhases:
    """Phase lines held back until the wait that ends their phase has passed.

    A wait as a phase's last step is settled at once, and the engine closes the phase and enters
    the next one in that same tick: the next phase's first step carries the wait as its due time.
    Printed as written, "phase completed" would stand ten minutes before the wait was over; held
    here, the phase ends (and the next begins) when the wait does, or earlier when a step of the
    run moves first (a GM skipped ahead). A wait a run never got to the end of (the rehearsal
    stopped first) never shows its phase completed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._until: dict[int, dt.datetime] = {}
        self._held: dict[int, list[tuple[views.RunView, history.Entry]]] = {}

    def hold(self, view: views.RunView, entry: history.Entry) -> bool:
        """True when ``entry`` is held back, to be shown by ``release``. Any step line of a run
        whose phase lines are held shows them first."""
        event = entry.event
        if entry.step_id is not None:
            self.release(view.id)
        if (
            isinstance(event, history.StepDone)
            and event.hold_until is not None
            and event.hold_until > entry.at
        ):
            self._until[view.id] = event.hold_until
            return False
        until = self._until.get(view.id)
        if until is None or not isinstance(event, history.PhaseStarted | history.PhaseCompleted):
            return False
        if self.console.clock.now() >= until:
            return False
        self._held.setdefault(view.id, []).append((view, entry))
        return True

    def release_due(self) -> None:
        """Show the phase lines of every run whose wait has passed by now."""
        now = self.console.clock.now()
        for run_id, until in list(self._until.items()):
            if until <= now:
                self.release(run_id)

    def release(self, run_id: int) -> None:
        self._until.pop(run_id, None)
        for view, entry in self._held.pop(run_id, []):
            show_line(self.console, view, entry)
