"""What every stage of a tick is handed: the runner's collaborators, in one small value.

The stages (``reclaim``, ``occurrences``, ``advance``, ``retention``) keep no state of the
runner's own; what one of them remembers between ticks (when retention last failed, which runs
are held in process) lives on that stage's object, not here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.approvals import RequestApproval
from runner.bus import LocalEventBus
from runner.clock import Clock
from runner.engine.core import CloseParked, DriveOutcome, ErrorMemo, Lease, RunnerSettings
from runner.registry import ActionRegistry


class HoldPolicy(Protocol):
    """What a drive does with a run whose next step falls due soon."""

    async def hold(self, ctx: EngineContext, lease: Lease, outcome: DriveOutcome) -> bool:
        """Keep the lease and resume the run at ``outcome.wake``; False: give the lease back with
        the wake for a tick to find."""

    def drive_ended(self, run_id: int, *, ended: bool) -> None:
        """A drive of the run gave its lease back, or (``ended``) ended the run."""


class NeverHold:
    """A runner ticked by hand: every wait goes back to the database for a tick to find."""

    async def hold(self, ctx: EngineContext, lease: Lease, outcome: DriveOutcome) -> bool:
        return False

    def drive_ended(self, run_id: int, *, ended: bool) -> None:
        pass


@dataclass
class EngineContext:
    engine: AsyncEngine
    registry: ActionRegistry
    clock: Clock
    owner: str
    settings: RunnerSettings
    versions: catalog.VersionCache
    bus: LocalEventBus
    hold: HoldPolicy = field(default_factory=NeverHold)
    close_parked: CloseParked | None = None
    # Posts a step's approval request (``runner.approvals``); None: the step parks with none.
    request_approval: RequestApproval | None = None
    errors: ErrorMemo = field(default_factory=ErrorMemo)
    # How many runs are driven at once, by the tick and in process alike.
    gate: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.gate = asyncio.Semaphore(self.settings.concurrent_runs)
