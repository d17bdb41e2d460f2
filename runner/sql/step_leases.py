"""The engine's statements on ``event_run_steps``: a step's lease is claimed, settled, parked
or given back for a retry, holds are set on the next step, and the leases of runners that died
are reclaimed. Each one matches only while the lease is ours (or, for the reclaim, run out).

A reminder (a step of phase ``REMINDERS_PHASE``) goes through the same claim and settles
(``reminder=True``): it is delivered while its run is still ``scheduled``, so its claim insists
on that instead of ``running``, and its settle holds whatever the run did meanwhile (a message
that went out went out, and the row must say so). The claim is the one writer of ``attempts``
for both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.definitions import REMINDERS_PHASE
from runner.records import StaleStep
from runner.schema import runs, steps
from runner.sql import step_guards as guards
from runner.states import RunStatus, StepStatus

GAVE_UP = "gave up after repeated interruptions"


def _claim_statement(with_version: bool, reminder: bool) -> sa.Update:
    # A phase's step is claimed while its run is ``running``; a reminder, before it starts.
    run_still_ours = (
        sa.select(sa.literal(1))
        .where(
            runs.c.id == sa.bindparam("b_run"),
            runs.c.status == (RunStatus.SCHEDULED if reminder else RunStatus.RUNNING),
            runs.c.claimed_by == sa.bindparam("b_owner"),
        )
        .exists()
    )
    recorded: dict[str, Any] = {"action_version": sa.bindparam("b_version")} if with_version else {}
    which = [steps.c.phase == REMINDERS_PHASE] if reminder else []
    return (
        sa.update(steps)
        .where(
            steps.c.id == sa.bindparam("b_step"),
            *which,
            steps.c.status == StepStatus.PENDING,
            sa.or_(steps.c.due_at.is_(None), steps.c.due_at <= sa.bindparam("b_at")),
            run_still_ours,
        )
        .values(
            status=StepStatus.RUNNING,
            attempts=steps.c.attempts + 1,
            claimed_by=sa.bindparam("b_owner"),
            claim_expires_at=sa.bindparam("b_lease"),
            started_at=sa.func.coalesce(steps.c.started_at, sa.bindparam("b_at")),
            **recorded,
            updated_at=sa.bindparam("b_at"),
        )
    )


# The statements every step sends are built once, with bound parameters: building one per call
# cost more Python than SQLite takes to run it (the compiled form is cached either way).
_CLAIM = {
    (version, reminder): _claim_statement(version, reminder)
    for version in (True, False)
    for reminder in (True, False)
}


async def claim(
    conn: AsyncConnection,
    step_id: int,
    *,
    run_id: int,
    owner: str,
    lease_until: dt.datetime,
    now: dt.datetime,
    action_version: int | None = None,
    reminder: bool = False,
) -> bool:
    """``pending -> running`` (leased), only if due and only while *our* lease holds a run that
    is still ``running`` (a reminder's: still ``scheduled``, so a start or a cancel committed
    first wins). Folding the run's status into the claim is how a pause pressed mid-batch stops
    the batch at the very next step, without a separate read. The version of the action about
    to perform it is recorded (none when nobody registered the action)."""
    parameters = {"b_step": step_id, "b_run": run_id, "b_owner": owner, "b_lease": lease_until, "b_at": now}
    if action_version is not None:
        parameters["b_version"] = action_version
    result = await conn.execute(_CLAIM[action_version is not None, reminder], parameters)
    return result.rowcount == 1


async def stretch(
    conn: AsyncConnection,
    step_id: int,
    owner: str,
    *,
    held_until: dt.datetime,
    lease_until: dt.datetime,
    now: dt.datetime,
) -> bool:
    """Move the lease of a step we claimed from ``held_until`` to ``lease_until``, only while
    the row still holds exactly the lease our claim wrote: a reclaim, a human settle or another
    runner's claim since then changed it, and we are told 0. Moves the column it guards on."""
    result = await conn.execute(
        sa.update(steps)
        .where(_leased_by(step_id, owner), steps.c.claim_expires_at == held_until)
        .values(claim_expires_at=lease_until, updated_at=now)
    )
    return result.rowcount == 1


def _leased_by(step_id: int, owner: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        steps.c.id == step_id,
        steps.c.status == StepStatus.RUNNING,
        steps.c.claimed_by == owner,
        steps.c.claim_expires_at.is_not(None),
    )


def _ours(step_id: int, owner: str) -> sa.ColumnElement[bool]:
    """We hold the step's lease and its run may still have steps settled."""
    return sa.and_(_leased_by(step_id, owner), guards.run_settles)


def _answered(result: Any) -> dict[str, Any]:
    """What the action answered, stored only when it answered something (an empty answer
    leaves an earlier one in place)."""
    return {} if result is None else {"result": result}


def _ended(status: StepStatus, now: dt.datetime, result: Any = None) -> dict[str, Any]:
    """A leased step settled for good: its end status and time, the lease let go."""
    return {"status": status, "finished_at": now, **guards.released(now), **_answered(result)}


async def finish(
    conn: AsyncConnection,
    step_id: int,
    owner: str,
    status: StepStatus,
    now: dt.datetime,
    *,
    error: str | None = None,
    result: Any = None,
    reminder: bool = False,
) -> bool:
    """Settle a step we hold the lease of (``done`` or ``failed``); a reminder's whatever its
    run did meanwhile."""
    parameters = {"b_step": step_id, "b_owner": owner, "b_status": status, "b_at": now}
    parameters["b_error"] = error[:500] if error else None
    if result is not None:
        parameters["b_result"] = result
    outcome = await conn.execute(_FINISH[result is not None, reminder], parameters)
    return outcome.rowcount == 1


def _finish_statement(with_result: bool, reminder: bool) -> sa.Update:
    ours = sa.and_(
        steps.c.id == sa.bindparam("b_step"),
        steps.c.status == StepStatus.RUNNING,
        steps.c.claimed_by == sa.bindparam("b_owner"),
        steps.c.claim_expires_at.is_not(None),
        *([] if reminder else [guards.run_settles]),
    )
    answered = {"result": sa.bindparam("b_result", type_=steps.c.result.type)} if with_result else {}
    return (
        sa.update(steps)
        .where(ours)
        .values(
            status=sa.bindparam("b_status"),
            finished_at=sa.bindparam("b_at"),
            claimed_by=None,
            claim_expires_at=None,
            updated_at=sa.bindparam("b_at"),
            last_error=sa.bindparam("b_error"),
            **answered,
        )
    )


# ``finish`` is ``_ours`` and ``_ended`` with bound parameters, built once (see ``_CLAIM``).
_FINISH = {
    (result, reminder): _finish_statement(result, reminder)
    for result in (True, False)
    for reminder in (True, False)
}


async def park(
    conn: AsyncConnection, step_id: int, owner: str, now: dt.datetime, *, result: Any = None
) -> bool:
    """Leased -> parked: the lease is cleared, so nothing will ever reclaim it."""
    values = {"claim_expires_at": None, "updated_at": now, **_answered(result)}
    outcome = await conn.execute(sa.update(steps).where(_ours(step_id, owner)).values(**values))
    return outcome.rowcount == 1


async def cancel_on_ended_run(
    conn: AsyncConnection, step_id: int, owner: str, now: dt.datetime, *, result: Any = None
) -> bool:
    """A step we hold the lease of, whose run ended while it was dispatched: ``cancelled``.
    True only when that is what happened (not when we lost the lease, or the run lives on)."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(_leased_by(step_id, owner), ~guards.run_settles)
        .values(**_ended(StepStatus.CANCELLED, now, result))
    )
    return outcome.rowcount == 1


async def reschedule(
    conn: AsyncConnection,
    step_id: int,
    owner: str,
    due_at: dt.datetime,
    error: str,
    now: dt.datetime,
    *,
    reminder: bool = False,
) -> bool:
    """A transient failure with attempts left: back to pending at ``due_at``. ``attempts`` is
    untouched; the claim already counted this attempt."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(_leased_by(step_id, owner) if reminder else _ours(step_id, owner))
        .values(
            status=StepStatus.PENDING,
            due_at=due_at,
            last_error=error[:500],
            **guards.released(now),
        )
    )
    return outcome.rowcount == 1


async def hold_next(
    conn: AsyncConnection, run_id: int, phase: str, after_seq: int, due_at: dt.datetime
) -> bool:
    """A wait holds the NEXT pending step of the phase, and only that one, and only ever later.

    Never pulling a due date earlier is what stops a re-dispatched wait from doubling (or
    cutting short) the hold.
    """
    later = steps.alias("later")
    next_seq = (
        sa.select(sa.func.min(later.c.seq))
        .where(
            later.c.run_id == run_id,
            later.c.phase == phase,
            later.c.seq > after_seq,
            later.c.status == StepStatus.PENDING,
        )
        .scalar_subquery()
    )
    outcome = await conn.execute(
        sa.update(steps)
        .where(
            steps.c.run_id == run_id,
            steps.c.phase == phase,
            steps.c.status == StepStatus.PENDING,
            steps.c.seq == next_seq,
            sa.or_(steps.c.due_at.is_(None), steps.c.due_at < due_at),
        )
        .values(due_at=due_at)
    )
    return outcome.rowcount == 1


async def stale(conn: AsyncConnection, now: dt.datetime) -> list[StaleStep]:
    """Leased steps whose lease has run out (their runner died or hung). Parked steps have a
    NULL lease and never appear here, however long they wait."""
    query = sa.select(steps.c.id, steps.c.run_id, steps.c.attempts, steps.c.claimed_by).where(
        guards.leased, steps.c.claim_expires_at < now
    )
    return [StaleStep.from_row(row) for row in (await conn.execute(query)).mappings().all()]


@dataclass(frozen=True)
class Reclaimed:
    failed: int
    reclaimed: int
    cancelled: int = 0


async def reclaim_stale(
    conn: AsyncConnection, now: dt.datetime, max_attempts: int, *, step_ids: Sequence[int] | None = None
) -> Reclaimed:
    """Give up first, hand back second; neither statement touches ``attempts``.

    The order is the point: handing back first would return a spent step to ``pending`` before
    the give-up could see it, and ``max_attempts`` would never be reached (the row retries
    forever). Resetting ``attempts`` here would do the same.
    """
    scope = [guards.leased, steps.c.claim_expires_at < now]
    if step_ids is not None:
        if not step_ids:
            return Reclaimed(0, 0)
        scope.append(steps.c.id.in_(step_ids))
    # A step whose run was ended (cancelled, failed, missed) while its runner was away has
    # nothing to go back to: handing it back would leave it pending on a dead run for ever.
    orphaned = await conn.execute(
        sa.update(steps).where(*scope, guards.run_ended_early).values(**_ended(StepStatus.CANCELLED, now))
    )
    gave_up = await conn.execute(
        sa.update(steps)
        .where(*scope, steps.c.attempts >= max_attempts)
        .values(last_error=GAVE_UP, **_ended(StepStatus.FAILED, now))
    )
    handed_back = await conn.execute(
        sa.update(steps).where(*scope).values(status=StepStatus.PENDING, **guards.released(now))
    )
    return Reclaimed(failed=gave_up.rowcount, reclaimed=handed_back.rowcount, cancelled=orphaned.rowcount)
