"""The conditions the step statements test, shared by the engine's leases (``step_leases``)
and a person's settles (``step_settles``).

A step is *leased* when ``running`` with a ``claim_expires_at`` (a runner is dispatching it; the
lease is stale once that time has passed) and *parked* when ``running`` with ``claim_expires_at IS
NULL`` (a cue waiting for a human). That pair, and only that pair, is what confirm and skip may
touch, and what the reclaim must never touch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from runner.schema import runs, steps
from runner.states import RUN_ENDED_EARLY, RUN_IN_FLIGHT, RUN_SETTLES_STEPS, RunStatus, StepStatus

parked = sa.and_(steps.c.status == StepStatus.RUNNING, steps.c.claim_expires_at.is_(None))
leased = sa.and_(steps.c.status == StepStatus.RUNNING, steps.c.claim_expires_at.is_not(None))


def run_is(statuses: Iterable[RunStatus]) -> sa.ColumnElement[bool]:
    """The step's own run is in ``statuses`` (correlated on ``steps.run_id``)."""
    return (
        sa.select(sa.literal(1))
        .where(runs.c.id == steps.c.run_id, runs.c.status.in_(statuses))
        .correlate(steps)
        .exists()
    )


run_settles = run_is(RUN_SETTLES_STEPS)
# A human may settle a step of any run that has not ended (a pending step of a run not yet
# started may be skipped), never one of a run that has.
run_not_ended = run_is(RUN_IN_FLIGHT)
# The statuses ``lifecycle.move_run(cancel_open=True)`` moves a run to: it cancels every open step but a leased one.
run_ended_early = run_is(RUN_ENDED_EARLY)


def released(now: dt.datetime) -> dict[str, Any]:
    """The lease let go: no runner holds the step, and the reclaim has nothing to expire."""
    return {"claimed_by": None, "claim_expires_at": None, "updated_at": now}
