"""A rehearsal's reminders: each sent at its moment before the start, through the rehearsal's
delivery, as a live occurrence sends it."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from actions import build_registry
from runner import views
from runner.definitions import REMINDERS_PHASE, reminder_action
from runner.dispatch import perform
from runner.registry import Envelope
from runner.reminder_rules import reminder_label
from runner.states import ActionOutcome, StepStatus

if TYPE_CHECKING:
    from rehearsal.session import Rehearsal

ACTOR_NAME = "rehearsal"


async def remind(rehearsal: Rehearsal, scopes: list[str], starts_at: dt.datetime) -> None:
    """Each reminder at its moment before ``starts_at``, for each scope, performed by the
    action a live occurrence performs it with (``reminder_action``, with the step context
    a live reminder has) through this rehearsal's delivery: what players would read is
    shown, and a channel or ping role the config lacks fails here, not an hour before the
    live event. A rehearsal run has no reminders of its own (it starts now, as a manual
    start does), so they are sent here, before it starts. As live, a failed reminder never
    stops the event; the rehearsal still ends "did not complete" (``_finish``)."""
    definition = rehearsal.definition
    assert definition is not None
    order = sorted(range(len(definition.reminders)), key=lambda seq: -definition.reminders[seq].before)
    for seq in order:
        reminder = definition.reminders[seq]
        await rehearsal._pass_time(rehearsal.clock.now(), starts_at - dt.timedelta(seconds=reminder.before))
        for scope in scopes:
            await _send_reminder(rehearsal, seq, scope, starts_at)


async def _send_reminder(rehearsal: Rehearsal, seq: int, scope: str, starts_at: dt.datetime) -> None:
    definition = rehearsal.definition
    assert definition is not None
    reminder = definition.reminders[seq]
    label = reminder_label(definition, seq)
    context = views.StepContext(
        event_key=definition.key,
        event_title=definition.title,
        phase_key=REMINDERS_PHASE,
        phase_label="Reminders",
        step_index=seq,
        step_label=label,
        scope=scope,
        rehearsal=True,
        starts_at=starts_at,
    )

    async def describe(run_id: int, step_id: int) -> views.StepContext:
        return context

    envelope = Envelope(
        actor=ACTOR_NAME,
        idempotency_key=f"rehearsal-reminder-{seq}-{scope}",
        params=dict(reminder.params),
        run_id=0,
        scope=scope,
        step_id=0,
        verify=False,
    )
    registry = build_registry(rehearsal.services.delivery, describe)
    action = reminder_action(reminder.to)
    outcome = await perform(registry, envelope, action)
    rehearsal.console.release(envelope.step_id)
    name = f"{label} ({scope})" if scope else label
    record = {
        "scope": scope,
        "label": label,
        "before_seconds": reminder.before,
        "action": action,
    }
    if outcome.outcome is ActionOutcome.DONE:
        rehearsal.console.aside("reminder", f"{name}: sent", **record, outcome="sent")
        return
    error = outcome.error or "not sent"
    rehearsal.failed_reminders.append(f"{name}: {error}")
    rehearsal.console.emit(
        "reminder",
        f"{name} FAILED: {error} (live, it would not be sent; the event would start all the same)",
        **record,
        outcome=StepStatus.FAILED.value,  # a live reminder is a step: it would end so
        error=error,
    )
