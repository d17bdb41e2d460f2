"""Preflight: ask the action of everything a definition will perform, with ``verify: true``,
whether it could act, before a run starts or a version is published (the channel exists, the
bot may post and mention there, ...). Nothing is sent.

Everything means every step of every phase *and* every reminder (``performed``): a reminder is
a ``discord.announce`` of its run, sent before the start, and a channel or ping role it names
wrongly fails as surely as a step's, only earlier (an hour before the event, with no rehearsal
to have shown it). One walk, so no front end can check the steps and forget the reminders.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runner.approvals import needs_approval
from runner.definitions import EventDefinition, reminder_action
from runner.definitions.signup import SIGNUP_ACTION
from runner.dispatch import perform
from runner.errors import Problem
from runner.registry import ActionRegistry, Envelope
from runner.states import ActionOutcome

VERIFY_KEY = "0" * 40


@dataclass(frozen=True)
class Performed:
    """One action a run of the definition performs, and where the definition says so: a step
    (``phase`` and ``step``) or a reminder (``field``: ``reminders.<index>``)."""

    action: str
    params: dict[str, Any]
    phase: str | None = None
    step: int | None = None
    field: str | None = None


def performed(definition: EventDefinition) -> Iterator[Performed]:
    """Every action a run performs: the reminders (first, as they go out before the start),
    then each phase's steps."""
    for index, reminder in enumerate(definition.reminders):
        yield Performed(reminder_action(reminder.to), dict(reminder.params), field=f"reminders.{index}")
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            params = dict(step.params)
            if step.action == SIGNUP_ACTION and params.get("channel") is None and definition.signup:
                # The step posts where the sign-up says when it names no channel of its own.
                params["channel"] = definition.signup.channel
            yield Performed(step.action, params, phase=phase.key, step=index)


async def preflight(
    registry: ActionRegistry, definition: EventDefinition, *, scope: str = "", actor: str | None = None
) -> list[Problem]:
    problems: list[Problem] = []
    for each in performed(definition):
        envelope = Envelope(
            actor=actor,
            idempotency_key=VERIFY_KEY,
            params=each.params,
            run_id=0,
            scope=scope,
            step_id=0,
            verify=True,
        )
        outcome = await perform(registry, envelope, each.action)
        if outcome.outcome is not ActionOutcome.DONE:
            problems.append(
                Problem(outcome.error or "not ready", phase=each.phase, step=each.step, field=each.field)
            )
    problems.extend(thread_targets(definition)[1])
    return problems


def needing_approval(
    registry: ActionRegistry, definition: EventDefinition, approve_from: str
) -> list[Performed]:
    """The steps of a run that will wait for a staff approval (``runner.approvals``)."""
    return [
        each
        for each in performed(definition)
        if each.field is None
        and (action := registry.get(each.action)) is not None
        and needs_approval(action.risk, approve_from)
    ]


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


THREAD_ACTION = "discord.thread"
ANNOUNCE_ACTION = "discord.announce"


@dataclass(frozen=True)
class ThreadTarget:
    """A ``discord.thread`` step and the channel of the announcement it starts its thread on."""

    phase: str
    step: int
    channel: str


def thread_targets(definition: EventDefinition) -> tuple[list[ThreadTarget], list[Problem]]:
    """Each thread step's announcement, as the run finds it: the latest earlier announce step
    (labelled ``on``, when the step says). A thread step with none is a problem: the run would
    fail it, with nothing to start the thread on. The channels are the front end's to check
    (Create Public Threads, Send Messages in Threads)."""
    targets: list[ThreadTarget] = []
    problems: list[Problem] = []
    earlier: list[tuple[str | None, str]] = []
    for phase in definition.phases:
        for index, step in enumerate(phase.steps):
            if step.action == ANNOUNCE_ACTION and isinstance(step.params.get("channel"), str):
                earlier.append((step.label, step.params["channel"]))
            elif step.action == THREAD_ACTION:
                on = step.params.get("on")
                found = [channel for label, channel in earlier if on is None or label == on]
                if found:
                    targets.append(ThreadTarget(phase.key, index, found[-1]))
                else:
                    which = f"labelled {on!r}" if on is not None else "at all"
                    problems.append(
                        Problem(
                            f"no discord.announce step {which} comes before this thread step: "
                            "a thread is started on an announcement the run posted",
                            phase=phase.key,
                            step=index,
                            field="on" if on is not None else None,
                        )
                    )
    return targets, problems
