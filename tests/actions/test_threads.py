"""``discord.thread`` (actions/threads.py) against the recording delivery: which announcement it
starts the thread on, one thread per announcement however often the step runs, and the params
it accepts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from actions.delivery import RecordingDelivery
from actions.threads import THREAD_NAME_MAX, RecordingThreads, ThreadParams, thread_action
from bridge.threads import Announced
from runner.registry import Envelope
from runner.views import StepContext

CONTEXT = StepContext(
    event_key="raid",
    event_title="Harbour Raid",
    phase_key="muster",
    phase_label="Muster",
    step_index=2,
    step_label=None,
    scope="north",
    rehearsal=False,
)


async def described(run_id: int, step_id: int) -> StepContext:
    return CONTEXT


def envelope(params: dict[str, Any], *, verify: bool = False) -> Envelope:
    return Envelope(
        actor=None, idempotency_key="k" * 40, params=params, run_id=7, scope="north", step_id=9, verify=verify
    )


async def perform(action: Any, params: dict[str, Any], **kw: Any) -> Any:
    return await action.perform(envelope(params, **kw), action.params_model.model_validate(params))


async def test_the_thread_goes_on_the_latest_announcement_and_is_recorded() -> None:
    delivery, store = RecordingDelivery(), RecordingThreads()
    store.posted[(7, None)] = Announced("100", "555")
    action = thread_action(delivery, described, store)
    answer = await perform(action, {"name": "{title} in {scope}"})
    assert answer == {
        "ok": True,
        "output": {"thread": {"channel_id": "100", "thread_id": "555", "created": True}},
    }
    (request,) = delivery.thread_attempts
    assert (request.name, request.message_id, request.auto_archive_minutes) == (
        "Harbour Raid in north",
        "555",
        1440,
    )
    assert store.recorded == [(7, 9, "100", "555")]


async def test_a_second_run_of_the_step_takes_the_thread_the_first_made() -> None:
    delivery, store = RecordingDelivery(), RecordingThreads()
    store.posted[(7, "Call")] = Announced("100", "555")
    action = thread_action(delivery, described, store)
    await perform(action, {"name": "Talk", "on": "Call"})
    again = await perform(action, {"name": "Talk", "on": "Call"})
    assert again["output"]["thread"] == {"channel_id": "100", "thread_id": "555", "created": False}
    assert len(delivery.threads) == 1


async def test_with_no_announcement_posted_the_step_fails_for_good() -> None:
    action = thread_action(RecordingDelivery(), described, RecordingThreads())
    answer = await perform(action, {"name": "Talk", "on": "Call"})
    assert answer == {
        "ok": False,
        "retry": False,
        "error": "no announcement labelled 'Call' has been posted yet: a thread is started on one",
    }


async def test_verify_sends_nothing() -> None:
    delivery = RecordingDelivery()
    action = thread_action(delivery, described, RecordingThreads())
    assert await perform(action, {"name": "Talk"}, verify=True) == {"ok": True}
    assert delivery.thread_attempts == []


async def test_a_long_rendered_name_is_cut_to_discords_limit() -> None:
    delivery, store = RecordingDelivery(), RecordingThreads()
    store.posted[(7, None)] = Announced("100", "555")
    await perform(thread_action(delivery, described, store), {"name": "{title} " + "x" * 90})
    assert len(delivery.thread_attempts[0].name) == THREAD_NAME_MAX


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "{nope}"}, "name"),
        ({"name": "Talk", "auto_archive_minutes": 30}, "auto_archive_minutes"),
        ({"name": "Talk", "colour": 1}, "colour"),
    ],
)
def test_params_it_refuses(params: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ThreadParams.model_validate(params)
    assert caught.value.errors()[0]["loc"][0] == where
