"""The composition root: one engine, registry, runner and controls wired to one delivery.

The bot builds it with the Discord delivery, the rehearsal with a console one, tests with a
recording one; everything else is identical, which is what makes a rehearsal worth trusting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import build_registry
from actions.delivery import Delivery, approval_requester, cue_closer
from actions.messaging import Describe
from bridge.threads import RunThreads
from runner import views
from runner.bus import RunsChanged
from runner.catalog import VersionCache
from runner.clock import Clock, SystemClock
from runner.controls import Controls
from runner.engine import Runner, RunnerSettings
from runner.registry import ActionRegistry
from runner.signup_desk import SignupDesk
from runner.signups import RunSignups
from wiring.game_targets import RconServer, WebhookTarget

# The delivery a front end wired in, as its own type (the bot's is a DiscordDelivery).
D = TypeVar("D", bound=Delivery)


@dataclass
class Services(Generic[D]):
    engine: AsyncEngine
    clock: Clock
    versions: VersionCache
    describe: Describe
    delivery: D
    registry: ActionRegistry
    runner: Runner
    controls: Controls
    # Every change to a sign-up list, published on the runner's bus once committed.
    signups: SignupDesk


def assemble(
    engine: AsyncEngine,
    make_delivery: Callable[[Describe], D],
    *,
    clock: Clock | None = None,
    settings: RunnerSettings | None = None,
    owner: str | None = None,
    drive_starts: bool = False,
    webhooks: Mapping[str, WebhookTarget] | None = None,
    rcon: Mapping[str, RconServer] | None = None,
) -> Services[D]:
    """``make_delivery`` gets the step describer (for deliveries that render context themselves);
    a ready delivery is passed as ``lambda _: delivery``. ``drive_starts``: this process serves
    its runner, so a start is driven by it at once (the bot) rather than at a tick (a rehearsal,
    which drives time itself)."""
    clock = clock or SystemClock()
    versions = VersionCache()
    describe = views.step_describer(engine, versions)
    delivery = make_delivery(describe)
    registry = build_registry(
        delivery, describe, RunThreads(engine, clock), RunSignups(engine), webhooks, rcon
    )
    runner = Runner(
        engine,
        registry,
        clock=clock,
        owner=owner,
        settings=settings,
        versions=versions,
        close_parked=cue_closer(delivery),
        request_approval=approval_requester(delivery, describe),
    )
    # A control's change goes out on the runner's bus (``RunsChanged``), once committed; whoever
    # ticks the runner subscribes to it (the bot's ticker).
    controls = Controls(
        engine,
        clock=clock,
        versions=versions,
        on_change=functools.partial(runner.bus.publish, RunsChanged()),
        driver=runner if drive_starts else None,
    )
    desk = SignupDesk(engine, runner.bus)
    return Services(engine, clock, versions, describe, delivery, registry, runner, controls, desk)
