"""The delivery interface (actions/delivery.py): the recording delivery the tests and
``validate`` use keeps the contract every delivery must (one message per idempotency key,
scripted failures, ``check`` sends nothing), and ``cue_closer`` finds a posted cue in what the
action answered."""

from __future__ import annotations

from typing import Any

import pytest

from actions.delivery import (
    Announcement,
    Cue,
    DeliveryError,
    Posted,
    RecordingDelivery,
    cue_closer,
)
from runner.history import RunEnding


def announcement(key: str = "k1", channel: str = "announcements") -> Announcement:
    return Announcement(
        channel=channel, content="Hello", embed=None, ping_role=None, idempotency_key=key, run_id=1, step_id=2
    )


def cue(key: str = "c1", channel: str | None = None) -> Cue:
    return Cue(
        channel=channel,
        title="Gates",
        instructions="Open them",
        ping_role=None,
        idempotency_key=key,
        run_id=1,
        step_id=3,
    )


async def test_one_message_per_idempotency_key_however_often_it_is_asked() -> None:
    """A step retried after a timeout asks again with the same key: the same message comes back
    and nothing new is sent, as Discord does with ``enforce_nonce``; the attempt is counted."""
    delivery = RecordingDelivery()
    first = await delivery.announce(announcement("k1"))
    again = await delivery.announce(announcement("k1"))
    other = await delivery.announce(announcement("k2"))
    assert again == first and other != first
    assert [r.request.idempotency_key for r in delivery.sent] == ["k1", "k2"]
    assert (len(delivery.attempts), delivery.deduplicated) == (3, 1)


async def test_a_cue_without_a_channel_goes_to_the_gm_channel() -> None:
    delivery = RecordingDelivery()
    posted = await delivery.post_cue(cue())
    assert posted.channel_id == "gm"
    assert delivery.cues() == [cue()] and delivery.announcements() == []


async def test_scripted_failures_are_raised_in_order_then_delivery_resumes() -> None:
    delivery = RecordingDelivery()
    delivery.fail_next("rate limited", transient=True, times=2)
    for _ in range(2):
        with pytest.raises(DeliveryError) as caught:
            await delivery.announce(announcement())
        assert caught.value.transient and str(caught.value) == "rate limited"
    await delivery.announce(announcement())
    assert len(delivery.sent) == 1 and len(delivery.attempts) == 3


async def test_an_unknown_channel_is_refused_for_good_and_check_sends_nothing() -> None:
    delivery = RecordingDelivery(known_channels={"announcements", "gm"})
    assert await delivery.check(announcement(channel="nowhere")) == ["channel 'nowhere' does not exist"]
    assert await delivery.check(announcement()) == []
    assert await delivery.check(cue()) == [], "a cue's default channel is the GM channel"
    assert delivery.attempts == [] and delivery.sent == [], "check sends nothing"
    with pytest.raises(DeliveryError) as caught:
        await delivery.announce(announcement(channel="nowhere"))
    assert not caught.value.transient, "retrying cannot create the channel"


def test_where_a_message_went_is_stored_as_plain_data() -> None:
    assert Posted("10", "20", "gm").as_dict() == {
        "channel_id": "10",
        "message_id": "20",
        "channel_name": "gm",
    }


@pytest.mark.parametrize(
    "output",
    [None, {}, {"posted": None}, {"posted": "20"}, {"posted": {"channel_id": "10"}}],
)
async def test_the_cue_closer_leaves_a_cue_that_was_never_posted_alone(output: dict[str, Any] | None) -> None:
    delivery = RecordingDelivery()
    await cue_closer(delivery)(1, 3, output, RunEnding("cancelled", why="storm"))
    assert delivery.closed == []


async def test_the_cue_closer_closes_the_posted_cue_with_the_reason() -> None:
    """A cancel pressed while the cue was being posted: the runner hands the action's answer to
    the closer, which closes that very message (ids as text, whatever the answer stored)."""
    delivery = RecordingDelivery()
    output = {"posted": {"channel_id": 10, "message_id": 20, "channel_name": "gm"}}
    await cue_closer(delivery)(1, 3, output, RunEnding("cancelled", why="storm"))
    assert delivery.closed == [(3, Posted("10", "20", "gm"), RunEnding("cancelled", why="storm"))]
