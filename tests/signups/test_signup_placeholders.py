"""``{attendees}`` and ``{attendee_count}``: filled from the run's sign-up when a step is sent,
mentions within a length Discord's limits were checked against, and refused in an event that has
no ``signup:``."""

from __future__ import annotations

import datetime as dt

import pytest

from actions import validation_registry
from actions.delivery import RecordingDelivery
from actions.messaging import ATTENDEES_TEXT_MAX, announce_action, attendee_mentions, placeholder_values
from runner import signups, views
from runner.definitions import validate
from runner.errors import DefinitionError
from runner.history import Actor
from runner.views import StepContext
from tests.support.definitions import announce, event, phase, step
from tests.support.world import T0, World

CONTENT = "{attendee_count} signed up: {attendees}"


def test_an_event_without_a_sign_up_may_not_use_the_sign_up_placeholders() -> None:
    spec = event("raid", phase("main", announce(CONTENT, "announcements")))
    with pytest.raises(DefinitionError) as caught:
        validate(spec, validation_registry())
    (problem,) = caught.value.problems
    assert (problem.phase, problem.step, problem.field) == ("main", 0, "params.content")
    assert "{attendees} and {attendee_count} list the run's sign-ups; this event has no signup:" in str(
        problem
    )
    validate({**spec, "signup": {"options": ["going"], "channel": "announcements"}}, validation_registry())


def test_mentions_fit_their_room_and_say_how_many_more() -> None:
    assert attendee_mentions([]) == "nobody yet"
    assert attendee_mentions(["1", "2"]) == "<@1>, <@2>"
    many = [f"{100000000000000000 + n}" for n in range(100)]
    text = attendee_mentions(many)
    assert len(text) <= ATTENDEES_TEXT_MAX
    shown = text.count("<@")
    assert 0 < shown < 100 and text.endswith(f" and {100 - shown} more")


def test_before_a_run_exists_they_are_checked_at_their_widest() -> None:
    widest = placeholder_values("north")
    assert len(widest["attendees"]) == ATTENDEES_TEXT_MAX and widest["attendee_count"] == "1000"
    context = StepContext("raid", "Raid", "main", "Main", 0, None, "", False, T0, attendees=("7", "8"))
    filled = placeholder_values("", context)
    assert (filled["attendees"], filled["attendee_count"]) == ("<@7>, <@8>", "2")


async def test_an_announcement_lists_the_attendees_as_they_are_when_it_is_sent(world: World) -> None:
    delivery = RecordingDelivery()
    world.register(announce_action(delivery, views.step_describer(world.engine, world.runner.versions)))
    await world.publish(
        event(
            "raid",
            phase("main", step("discord.announce", {"channel": "raids", "content": CONTENT})),
            signup={"options": {"going": 1}, "channel": "announcements"},
        )
    )
    from runner import catalog

    async with world.engine.begin() as conn:
        current = await catalog.current(conn, "raid", world.runner.versions)
        run_id = await catalog.create_run(
            conn, current, "", T0, T0 - dt.timedelta(hours=1), actor=Actor(None, "test")
        )
    assert run_id is not None
    before = T0 - dt.timedelta(minutes=30)
    for member_id in ("111111111111111111", "222222222222222222"):
        await signups.join(world.engine, run_id, member_id, f"m{member_id[0]}", "going", (), before)
    await world.tick(T0)
    (sent,) = delivery.sent
    assert sent.request.content == "1 signed up: <@111111111111111111>"
