"""Preflight: ask every step's action, with ``verify: true``, whether it could act, before a run
starts (the channel exists, the bot may post and mention there, ...). Nothing is sent."""

from __future__ import annotations

from runner.definitions import EventDefinition
from runner.dispatch import perform
from runner.errors import Problem
from runner.registry import ActionRegistry, Envelope
from runner.states import ActionOutcome

VERIFY_KEY = "0" * 40


async def preflight(
    registry: ActionRegistry, definition: EventDefinition, *, scope: str = "", actor: str | None = None
) -> list[Problem]:
    problems: list[Problem] = []
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            envelope = Envelope(
                actor=actor,
                idempotency_key=VERIFY_KEY,
                params=dict(step.params),
                run_id=0,
                scope=scope,
                step_id=0,
                verify=True,
            )
            outcome = await perform(registry, envelope, step.action)
            if outcome.outcome is not ActionOutcome.DONE:
                problems.append(Problem(outcome.error or "not ready", phase=phase.key, step=index))
    return problems


MANAGE_EVENTS_MISSING = (
    "the bot lacks the Manage Events permission, so this event's occurrences cannot be listed "
    "in the server's Events tab (grant it to the bot's role, or set discord_event: false)"
)


def listing_problem(
    definition: EventDefinition, *, mirror_by_default: bool, may_manage_events: bool
) -> Problem | None:
    """The mirror's own check: a definition that lists its occurrences as Discord scheduled
    events needs Manage Events. The front end says whether the bot holds it."""
    if may_manage_events or definition.discord_event_settings(mirror_by_default) is None:
        return None
    return Problem(MANAGE_EVENTS_MISSING, field="discord_event")
