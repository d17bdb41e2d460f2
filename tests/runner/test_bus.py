"""The runner's in-process event bus (``runner.bus``): what a subscriber is given, and that a
subscriber can never stop the runner that publishes."""

from __future__ import annotations

import asyncio
import logging

import pytest

from runner.bus import Closing, DriveFinished, Event, LocalEventBus, RunsChanged, TickFinished, TickStarted
from tests.support.world import World


def test_a_subscriber_gets_only_the_events_it_asked_for_until_it_unsubscribes() -> None:
    bus = LocalEventBus()
    seen: list[Event] = []
    everything: list[Event] = []
    subscription = bus.subscribe(seen.append, {DriveFinished})
    bus.subscribe(everything.append)

    bus.publish(TickStarted())
    bus.publish(DriveFinished(7))
    subscription.unsubscribe()
    bus.publish(DriveFinished(8))

    assert seen == [DriveFinished(7)]
    assert everything == [TickStarted(), DriveFinished(7), DriveFinished(8)]


def test_a_one_shot_subscriber_hears_once() -> None:
    bus = LocalEventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, {RunsChanged}, one_shot=True)
    bus.publish(RunsChanged())
    bus.publish(RunsChanged())
    assert seen == [RunsChanged()]


def test_a_failing_subscriber_is_logged_and_the_others_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    bus = LocalEventBus()
    seen: list[Event] = []

    def broken(_event: Event) -> None:
        raise RuntimeError("listener bug")

    bus.subscribe(broken)
    bus.subscribe(seen.append)
    with caplog.at_level(logging.ERROR, logger="runner.bus"):
        bus.publish(Closing())
    assert seen == [Closing()]
    assert "a subscriber to Closing failed" in caplog.text


async def test_a_coroutine_subscriber_runs_in_a_task_of_its_own() -> None:
    bus = LocalEventBus()
    heard = asyncio.Event()

    async def follow(event: Event) -> None:
        assert isinstance(event, DriveFinished)
        heard.set()

    bus.subscribe(follow)
    bus.publish(DriveFinished(1))
    assert not heard.is_set(), "publish does not wait for a coroutine subscriber"
    await asyncio.wait_for(heard.wait(), timeout=1)


async def test_a_tick_is_announced_on_the_bus_with_its_report(world: World) -> None:
    seen: list[Event] = []
    world.runner.bus.subscribe(seen.append)
    report = await world.runner.tick()
    assert seen == [TickStarted(), TickFinished(report)]
