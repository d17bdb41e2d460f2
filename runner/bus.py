"""The runner's wake-up path inside one process: typed events, published by whoever changed
something and delivered to whoever follows it, in the shape of APScheduler 4's
``LocalEventBroker`` (``subscribe`` answers a ``Subscription`` to ``unsubscribe``; a callback
is a plain function, called at once, or a coroutine function, run in a task of its own).

One path instead of a hook per caller: a control's change asks for a tick now; a tick starting
wakes the runs held in process (a control may have changed what they wait for); a tick's end or
a drive outside the tick letting its run go tells the front end that the run log has grown
(``LogGrew``); a sign-up list's change (``SignupsChanged``) wakes what shows it. Publishers do
not know their followers: a front end's loops subscribe in their constructors. (Another process's control reaches this one through the run's row, not the bus:
``runs.nudges`` and ``wake_at``.) A subscriber's failure is
logged and never reaches the publisher: the runner must not stop for a listener.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.engine.core import TickReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """Something the runner did that others in this process may want to act on."""


@dataclass(frozen=True)
class TickStarted(Event):
    """A tick begins: whatever waits in process looks again (a control may have moved it)."""


@dataclass(frozen=True)
class LogGrew(Event):
    """The run log may have grown (a tick or a drive is over): whatever shows it follows."""


@dataclass(frozen=True)
class TickFinished(LogGrew):
    """A tick is over; what it did."""

    report: TickReport


@dataclass(frozen=True)
class RunsChanged(Event):
    """A control changed runs (started, paused, confirmed, ...): whatever ticks them should
    tick now rather than at its next interval."""


@dataclass(frozen=True)
class VersionPublished(Event):
    """A new version of an event was published: its schedule (occurrences, reminders, the
    Events tab) follows at the next tick, which should be now."""

    key: str


@dataclass(frozen=True)
class DriveFinished(LogGrew):
    """A drive outside the tick (a start handed over, a wait held in process) let its run go:
    the run log has grown, as after a tick."""

    run_id: int


@dataclass(frozen=True)
class SignupsChanged(Event):
    """A run's sign-up list changed (a click, an import, a member who left, staff): its
    message, roles and thread follow now rather than at their next pass."""

    run_id: int


@dataclass(frozen=True)
class StaffChangedSignups(LogGrew):
    """Staff added, moved or removed a member, or closed or reopened sign-ups: the run log has
    a line for the staff log (a click's promotion waits for the staff log's next pass)."""

    run_id: int


@dataclass(frozen=True)
class ListingCreated(Event):
    """An occurrence was listed in a platform's events (Discord's Events tab): who imports its
    Interested members reads the new listing at once."""


@dataclass(frozen=True)
class StaffNotice(Event):
    """A line for staff that is not in the run log (a part of the bot that cannot do its work)."""

    text: str


@dataclass(frozen=True)
class Closing(Event):
    """The runner is shutting down: nothing held in process may keep waiting."""


Callback = Callable[[Any], Any]


@dataclass(eq=False)
class Subscription:
    bus: LocalEventBus
    callback: Callback
    event_types: frozenset[type[Event]] | None
    one_shot: bool = False

    def unsubscribe(self) -> None:
        self.bus.unsubscribe(self)


@dataclass
class LocalEventBus:
    _subscriptions: list[Subscription] = field(default_factory=list)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def subscribe(
        self,
        callback: Callback,
        event_types: Iterable[type[Event]] | None = None,
        *,
        one_shot: bool = False,
    ) -> Subscription:
        """Deliver every published event of ``event_types`` or a subclass of one (every event,
        if None) to ``callback``; ``one_shot``: only the first."""
        types = frozenset(event_types) if event_types is not None else None
        subscription = Subscription(self, callback, types, one_shot)
        self._subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def publish(self, event: Event) -> None:
        for subscription in list(self._subscriptions):
            if subscription.event_types is not None and subscription.event_types.isdisjoint(
                type(event).__mro__
            ):
                continue
            if subscription.one_shot:
                self.unsubscribe(subscription)
            self._deliver(subscription, event)

    def _deliver(self, subscription: Subscription, event: Event) -> None:
        try:
            result = subscription.callback(event)
        except Exception:
            log.exception("a subscriber to %s failed", type(event).__name__)
            return
        if asyncio.iscoroutine(result):
            task = asyncio.get_running_loop().create_task(result, name=f"eventbot {type(event).__name__}")
            self._tasks.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a subscriber's task failed", exc_info=task.exception())
