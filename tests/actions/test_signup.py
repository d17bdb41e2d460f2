"""``discord.signup`` (actions/signup.py) against the recording delivery: the channel it posts
in (its own, else the sign-up's), one message per run however often it runs, a run with no
sign-up refused for good, and a verify that checks the channel and sends nothing."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from actions.delivery import RecordingDelivery
from actions.signup import signup_action
from runner.definitions import SignupDefinition
from runner.registry import Envelope
from runner.signups import OptionList, SignupList
from runner.states import RunStatus
from runner.views import StepContext

START = dt.datetime(2026, 12, 5, 20, 0)
CONTEXT = StepContext(
    "raid", "Harbour Raid", "muster", "Muster", 2, None, "north", False, START, ("11", "12")
)


def listing(channel: str | None) -> SignupList:
    definition = SignupDefinition.model_validate({"options": ["going"], "channel": channel})
    return SignupList(7, definition, [OptionList("going", None)], START, START, RunStatus.RUNNING)


@dataclass
class Lists:
    by_run: dict[int, SignupList] = field(default_factory=dict)

    async def listing(self, run_id: int) -> SignupList | None:
        return self.by_run.get(run_id)


async def described(run_id: int, step_id: int) -> StepContext:
    return CONTEXT


async def perform(action: Any, params: dict[str, Any], *, verify: bool = False) -> Any:
    envelope = Envelope(
        actor=None, idempotency_key="k" * 40, params=params, run_id=7, scope="north", step_id=9, verify=verify
    )
    return await action.perform(envelope, action.params_model.model_validate(params))


async def test_the_step_posts_in_the_sign_ups_channel_once_per_run() -> None:
    delivery = RecordingDelivery()
    action = signup_action(delivery, described, Lists({7: listing("raids")}))
    first = await perform(action, {"content": "{attendee_count} coming to {title}"})
    assert first == {
        "ok": True,
        "output": {
            "posted": {"channel_id": "raids", "message_id": "1001", "channel_name": "raids"},
            "created": True,
        },
    }
    (request,) = delivery.signup_attempts
    assert (request.channel, request.content, request.run_id) == ("raids", "2 coming to Harbour Raid", 7)
    again = await perform(action, {"content": "again"})
    assert again["output"]["created"] is False
    assert again["output"]["posted"] == first["output"]["posted"]
    assert len(delivery.signup_messages) == 1


async def test_the_steps_own_channel_wins() -> None:
    delivery = RecordingDelivery()
    await perform(signup_action(delivery, described, Lists({7: listing("raids")})), {"channel": "general"})
    assert delivery.signup_attempts[0].channel == "general"


async def test_a_run_without_a_sign_up_fails_the_step_for_good() -> None:
    answer = await perform(signup_action(RecordingDelivery(), described, Lists()), {"channel": "raids"})
    assert answer == {"ok": False, "retry": False, "error": "this run's event has no signup:"}


async def test_a_verify_checks_the_channel_and_sends_nothing() -> None:
    delivery = RecordingDelivery(known_channels={"raids"})
    action = signup_action(delivery, described, Lists({7: listing("raids")}))
    assert await perform(action, {"channel": "raids"}, verify=True) == {"ok": True}
    refused = await perform(action, {"channel": "nowhere"}, verify=True)
    assert refused["ok"] is False and refused["error"] == "channel 'nowhere' does not exist"
    assert delivery.signup_attempts == [] and delivery.sent == []
