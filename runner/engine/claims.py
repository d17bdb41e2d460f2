"""Acting on a step claim only while its lease still covers the action.

A claim is won when its transaction's COMMIT returns, not when its UPDATE matched. The lease it
wrote was computed before that (``now + budget + margin``), and a COMMIT can take seconds: a
Galera cluster holds every commit while it drops a node that died (seconds, up to its
``evs.inactive_timeout``), and a loaded server can stall too. Acting on a claim whose lease ran
out while its COMMIT waited would dispatch a step another runner may already be reclaiming. So
before the action goes, the lease left must cover the action's whole budget; if it does not, the
lease is stretched by a compare-and-set on the very lease the claim wrote (refused if anyone
touched the step since), and if even that comes back too late, the step is left to the reclaim.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import on_galera, retry_on_conflict
from runner.engine.context import EngineContext
from runner.engine.core import Lease, log
from runner.records import StepRecord
from runner.sql import run_leases, step_leases

# A stretch whose own COMMIT comes back too late is tried again this many times at most.
STRETCHES = 3


@contextlib.contextmanager
def lease_kept_on_rollback(lease: Lease) -> Iterator[None]:
    """A transaction that renews the run lease sets ``lease.until`` before its COMMIT; if that
    COMMIT fails (a conflict the caller retries), the renewal never happened, so neither may the
    lease's memory of it, or the retry would skip the renewal it still needs."""
    until, claimed = lease.until, dict(lease.claimed)
    try:
        yield
    except BaseException:
        lease.until, lease.claimed = until, claimed
        raise


async def renew_for_claim(
    ctx: EngineContext, conn: AsyncConnection, lease: Lease, step_lease: dt.datetime
) -> None:
    """In a claim's transaction, before the claim: renew the run's lease when the step could
    outlast it, and on a Galera cluster at every claim.

    The claim reads the run's status (a pause or cancel must stop it) without writing the
    run's row, and a cluster certifies only rows written: a claim on one node still committed
    after a pause had committed on another (seen on the cluster), the seeds' "pause ignored
    mid-batch" on two nodes. Writing the run's row (its lease, always moved forward) makes the
    pause and the claim conflict, so the claim's COMMIT is refused, retried, and refused
    again by the pause it now sees. One more UPDATE a step, on a cluster only."""
    margin = dt.timedelta(seconds=ctx.settings.step_lease_margin_seconds)
    if lease.until >= step_lease + margin and not on_galera(conn):
        return
    until = step_lease + ctx.settings.after_step
    if until <= lease.until:
        # Already covered (a wait held in process leased it further); the row must still change.
        until = lease.until + dt.timedelta(milliseconds=1)
    lease.until = until
    await run_leases.renew_claim(conn, lease.run_id, ctx.owner, lease.until)


def budget(ctx: EngineContext, step: StepRecord) -> dt.timedelta:
    action = ctx.registry.get(step.action_id)
    return dt.timedelta(milliseconds=action.budget_ms if action else 1000)


def step_lease(ctx: EngineContext, step: StepRecord, now: dt.datetime) -> dt.datetime:
    return now + budget(ctx, step) + dt.timedelta(seconds=ctx.settings.step_lease_margin_seconds)


async def still_leased(ctx: EngineContext, lease: Lease, step: StepRecord) -> bool:
    """True when the action may go now: the lease our committed claim wrote (or a stretch of
    it) outlasts the action's budget from this instant."""
    held = lease.claimed.pop(step.id, None)
    if held is None:
        return True  # a claim made elsewhere (a test's); nothing to check it against
    needed = budget(ctx, step)
    for _ in range(STRETCHES):
        now = ctx.clock.now()
        if held - now >= needed:
            return True
        stretched = step_lease(ctx, step, now)
        if not await _stretch(ctx, step.id, held, stretched, now):
            break
        held = stretched
    log.warning(
        "run %s step %s: its claim committed too late to act on (lease until %s); left for the reclaim",
        lease.run_id,
        step.id,
        held.isoformat(),
        extra={"run_id": lease.run_id, "step_id": step.id},
    )
    return False


@retry_on_conflict
async def _stretch(
    ctx: EngineContext, step_id: int, held: dt.datetime, until: dt.datetime, now: dt.datetime
) -> bool:
    async with ctx.engine.begin() as conn:
        return await step_leases.stretch(
            conn, step_id, ctx.owner, held_until=held, lease_until=until, now=now
        )
