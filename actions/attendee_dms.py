"""``discord.dm_attendees``: a reminder written ``to: attendees``, a direct message to each member
seated in the run when it falls due (not to those on a waiting list).

It is only ever a reminder (``reminders:`` with ``to: attendees``; the event's model refuses it
as a step): a reminder is a step of its run in the reminders phase, so it falls due, is skipped
when late or when the run starts, and is logged exactly as a channel reminder is. What it
performs is the delivery's ``dm_attendees``: the bot writes one row per member and reminder (a
unique key makes a second write of the same row nothing, so a reminder retried after a crash,
or performed by two processes, never DMs a member twice) and its loop sends them
(``bot.cogs.reminders``); the rehearsal shows the DMs it would send. Members who turned
reminders off (``/reminders off``) are left out. Only ``content`` is sent: a DM has no role to
ping and no channel to name.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from actions import limits
from actions.delivery import AttendeeDms, Delivery, DeliveryError
from actions.messaging import DISCORD_BUDGET_MS, Describe, _Params, _placeholders_known, render
from runner.definitions import ATTENDEE_REMINDER_ACTION
from runner.definitions.signup import SignupDefinition
from runner.registry import Action, Envelope
from runner.states import AnswerKey


class AttendeeDmParams(_Params):
    content: str = Field(min_length=1, max_length=limits.CONTENT_MAX)

    _placeholders = field_validator("content")(_placeholders_known)

    def problems_for_scope(self, scope: str) -> list[tuple[str, str]]:
        if len(render(self.content, scope) or "") > limits.CONTENT_MAX:
            return [("content", f"in scope {scope!r} the content exceeds {limits.CONTENT_MAX} characters")]
        return []

    def signup_problems(self, signup: SignupDefinition | None) -> list[tuple[str, str]]:
        """Whom to send it to: the run's seated members, so the event needs ``signup:``."""
        if signup is None:
            return [("to", "to: attendees DMs the members seated in the run; this event has no signup:")]
        return []


def attendee_dms_action(
    delivery: Delivery, describe: Describe, *, budget_ms: int = DISCORD_BUDGET_MS
) -> Action[AttendeeDmParams]:
    async def perform(envelope: Envelope, params: AttendeeDmParams) -> dict[str, Any]:
        if envelope.verify:
            # Nothing to check before the run: no channel, no role; whom it reaches is decided
            # when it falls due.
            return {AnswerKey.OK: True}
        context = await describe(envelope.run_id, envelope.step_id)
        request = AttendeeDms(
            content=render(params.content, envelope.scope, context) or "",
            members=tuple(context.attendees or ()) if context else (),
            run_id=envelope.run_id,
            step_id=envelope.step_id,
            context=context,
        )
        try:
            queued = await delivery.dm_attendees(request)
        except DeliveryError as exc:
            return {AnswerKey.OK: False, AnswerKey.RETRY: exc.transient, AnswerKey.ERROR: str(exc)}
        return {AnswerKey.OK: True, AnswerKey.OUTPUT: {"dms": queued.as_dict()}}

    return Action(
        id=ATTENDEE_REMINDER_ACTION,
        label="A reminder's DM to each attendee",
        risk="notify",
        reversible="none",
        version=1,
        budget_ms=budget_ms,
        params_model=AttendeeDmParams,
        perform=perform,
        description="Sends a reminder by direct message to each member seated in the run, once each.",
    )
