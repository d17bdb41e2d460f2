"""``discord.signup``: the run's sign-up message, posted at this point of the run.

It is the message a booking posts in ``signup.channel`` (the same list, the same buttons, edited
the same way afterwards), and there is one per run whoever posts it: a run whose message went
out at booking, or on an earlier attempt of this step, answers that message and posts nothing.
Keeping it to one is the delivery's (``actions.delivery.Delivery.post_signup``): the bot writes
the run's row in the sign-up messages table before it posts, as the booking does, so the two
never both post, and a retry after a crash repeats the post with the run's nonce.

``channel`` defaults to the event's ``signup.channel``; ``content`` is written above the list
and pings nobody (the sign-up message never does). An event without ``signup:``, or a step with
no channel where the sign-up names none, is refused when the definition is validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field, field_validator

from actions import limits
from actions.delivery import Announcement, Delivery, DeliveryError, Embed, SignupPost
from actions.messaging import (
    DISCORD_BUDGET_MS,
    Describe,
    _channel_ref,
    _Params,
    _placeholders_known,
    render,
)
from runner.definitions.signup import SignupDefinition
from runner.registry import Action, Envelope
from runner.signups import SignupList
from runner.states import AnswerKey

ACTION_ID = "discord.signup"


class SignupStore(Protocol):
    """The run's side: its sign-up list (``None``: the run has no sign-up)."""

    async def listing(self, run_id: int) -> SignupList | None: ...


@dataclass
class NoSignups:
    """``SignupStore`` for a registry that runs nothing (checking definitions)."""

    async def listing(self, run_id: int) -> SignupList | None:
        return None


class SignupParams(_Params):
    channel: str | None = Field(
        default=None, description="a channel alias from config, or a channel id (default: signup.channel)"
    )
    content: str | None = Field(default=None, min_length=1, max_length=limits.CONTENT_MAX)

    _placeholders = field_validator("content")(_placeholders_known)
    _channel = field_validator("channel")(_channel_ref)

    def problems_for_scope(self, scope: str) -> list[tuple[str, str]]:
        if self.content and len(render(self.content, scope) or "") > limits.CONTENT_MAX:
            return [("content", f"in scope {scope!r} the content exceeds {limits.CONTENT_MAX} characters")]
        return []

    def signup_problems(self, signup: SignupDefinition | None) -> list[tuple[str, str]]:
        """What the event's ``signup:`` must give this step: a sign-up, and a channel."""
        if signup is None:
            return [("action", f"{ACTION_ID} posts the run's sign-up message; this event has no signup:")]
        problems = []
        if not signup.open_until_the_end:
            problems.append(
                (
                    "action",
                    f"{ACTION_ID} posts during the run, after the start, when these sign-ups are already "
                    f"closed (closes: {signup.closes}): its option buttons would be disabled from the "
                    "start; set signup.closes: end to take sign-ups while the run is in flight, or list "
                    "the attendees with {attendees} in an announcement",
                )
            )
        if self.channel is None and signup.channel is None:
            problems.append(
                ("params.channel", "no channel: the step names none and the event's signup: has no channel")
            )
        return problems


def signup_action(
    delivery: Delivery, describe: Describe, store: SignupStore, *, budget_ms: int = DISCORD_BUDGET_MS
) -> Action[SignupParams]:
    async def perform(envelope: Envelope, params: SignupParams) -> dict[str, Any]:
        if envelope.verify:
            # What the post needs of its channel is what an announcement with an embed needs
            # (preflight fills in the sign-up's channel when the step names none).
            if params.channel is None:
                return {
                    AnswerKey.OK: False,
                    AnswerKey.RETRY: False,
                    AnswerKey.ERROR: "no channel for the sign-up message",
                }
            check = Announcement(
                channel=params.channel,
                content=params.content,
                embed=Embed(title="Sign-ups"),
                ping_role=None,
                idempotency_key=envelope.idempotency_key,
                run_id=envelope.run_id,
                step_id=envelope.step_id,
            )
            problems = await delivery.check(check)
            if problems:
                return {
                    AnswerKey.OK: False,
                    AnswerKey.RETRY: False,
                    AnswerKey.ERROR: "; ".join(problems),
                    "problems": problems,
                }
            return {AnswerKey.OK: True}
        listing = await store.listing(envelope.run_id)
        if listing is None:
            return {
                AnswerKey.OK: False,
                AnswerKey.RETRY: False,
                AnswerKey.ERROR: "this run's event has no signup:",
            }
        channel = params.channel or listing.definition.channel
        if channel is None:
            return {
                AnswerKey.OK: False,
                AnswerKey.RETRY: False,
                AnswerKey.ERROR: "no channel: the step names none and the event's signup: has no channel",
            }
        context = await describe(envelope.run_id, envelope.step_id)
        request = SignupPost(
            channel=channel,
            content=render(params.content, envelope.scope, context),
            listing=listing,
            run_id=envelope.run_id,
            step_id=envelope.step_id,
            context=context,
        )
        try:
            posted = await delivery.post_signup(request)
        except DeliveryError as exc:
            return {AnswerKey.OK: False, AnswerKey.RETRY: exc.transient, AnswerKey.ERROR: str(exc)}
        return {AnswerKey.OK: True, AnswerKey.OUTPUT: posted.as_dict()}

    return Action(
        id=ACTION_ID,
        label="Post the sign-up message",
        risk="notify",
        reversible="manual",
        version=1,
        budget_ms=budget_ms,
        params_model=SignupParams,
        perform=perform,
        description="Posts the run's sign-up message (its list and buttons) here, unless the run has it already.",
    )
