"""Statements on ``event_run_steps``.

A step is *leased* when ``running`` with a future ``claim_expires_at`` (a runner is dispatching
it) and *parked* when ``running`` with ``claim_expires_at IS NULL`` (a cue waiting for a human).
That pair, and only that pair, is what confirm and skip may touch, and what the reclaim must
never touch. ``attempts`` has exactly one writer: the claim.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.history import Actor
from runner.records import StaleStep, StepRecord
from runner.schema import runs, steps
from runner.states import (
    RUN_ENDED_EARLY,
    RUN_IN_FLIGHT,
    RUN_SETTLES_STEPS,
    STEP_OPEN,
    OnFailure,
    RunStatus,
    StepStatus,
)

Row = sa.RowMapping

GAVE_UP = "gave up after repeated interruptions"

_parked = sa.and_(steps.c.status == StepStatus.RUNNING, steps.c.claim_expires_at.is_(None))
_stale = sa.and_(steps.c.status == StepStatus.RUNNING, steps.c.claim_expires_at.is_not(None))


def _run_is(statuses: Iterable[RunStatus]) -> sa.ColumnElement[bool]:
    """The step's own run is in ``statuses`` (correlated on ``steps.run_id``)."""
    return (
        sa.select(sa.literal(1))
        .where(runs.c.id == steps.c.run_id, runs.c.status.in_(statuses))
        .correlate(steps)
        .exists()
    )


_run_settles = _run_is(RUN_SETTLES_STEPS)
# A human may settle a step of any run that has not ended (a pending step of a run not yet
# started may be skipped), never one of a run that has.
_run_not_ended = _run_is(RUN_IN_FLIGHT)
# The statuses ``lifecycle.move_run(cancel_open=True)`` moves a run to: it cancels every open step but a leased one.
_run_ended_early = _run_is(RUN_ENDED_EARLY)


def new_idempotency_key() -> str:
    """40 hex characters, drawn once when the step row is created and never again: every
    attempt of the step sends the same key, and no two steps (or two databases) share one."""
    return secrets.token_hex(20)


@dataclass(frozen=True)
class StepSpec:
    action_id: str
    params: dict[str, Any]
    on_failure: str = OnFailure.PAUSE
    action_version: int = 1
    label: str | None = None


def _rows(
    run_id: int, phase: str, specs: Sequence[StepSpec], now: dt.datetime, first_due_at: dt.datetime | None
) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id,
            "phase": phase,
            "seq": seq,
            "label": spec.label,
            "action_id": spec.action_id,
            "params": spec.params,
            "action_version": spec.action_version,
            "on_failure": spec.on_failure,
            "idempotency_key": new_idempotency_key(),
            "due_at": first_due_at if seq == 0 else None,
            "created_at": now,
            "updated_at": now,
        }
        for seq, spec in enumerate(specs)
    ]


async def materialise_phase(
    conn: AsyncConnection,
    run_id: int,
    phase: str,
    specs: Sequence[StepSpec],
    now: dt.datetime,
    *,
    first_due_at: dt.datetime | None = None,
) -> int:
    """Create a phase's steps; re-materialising is a no-op thanks to ``uq_evstep_slot`` (and
    cannot overwrite an idempotency key a dispatch already sent)."""
    if not specs:
        return 0
    result = await conn.execute(insert_ignore(conn, steps), _rows(run_id, phase, specs, now, first_due_at))
    return max(result.rowcount, 0)


_INSERT_RETURNING_IDS = sa.insert(steps).returning(steps.c.id, steps.c.seq)


async def materialise_claiming_first(
    conn: AsyncConnection,
    run_id: int,
    phase: str,
    specs: Sequence[StepSpec],
    now: dt.datetime,
    *,
    owner: str,
    lease_until: dt.datetime,
    action_version: int | None,
) -> list[StepRecord]:
    """A new run's first phase, its first step created already claimed by ``owner`` (the
    claim ``claim`` would have made, ``attempts`` 1, in the creating transaction). One
    ``INSERT ... RETURNING`` (SQLite 3.35+, MariaDB 10.5+) gives the ids.

    Answers the steps as a read just before that claim would have seen them (the first one
    ``pending``, ``attempts`` 0), which is what the engine's drive expects of a step it is
    about to perform."""
    rows = _rows(run_id, phase, specs, now, None)
    unclaimed = {"status": StepStatus.PENDING, "attempts": 0, "claimed_by": None}
    unclaimed.update(claim_expires_at=None, started_at=None)
    for row in rows:
        row.update(unclaimed)
    claim = {"status": StepStatus.RUNNING, "attempts": 1, "claimed_by": owner}
    claim.update(claim_expires_at=lease_until, started_at=now)
    if action_version is not None:
        claim["action_version"] = action_version
    written = [{**rows[0], **claim}, *rows[1:]]
    inserted = await conn.execute(_INSERT_RETURNING_IDS, written)
    ids = {int(row.seq): int(row.id) for row in inserted}
    unset = dict.fromkeys(("last_error", "result", "settled_by_id", "settled_by_name", "note", "finished_at"))
    return [StepRecord.from_row({**row, **unset, "id": ids[row["seq"]]}) for row in rows]


async def get(conn: AsyncConnection, step_id: int) -> StepRecord | None:
    row = (await conn.execute(sa.select(steps).where(steps.c.id == step_id))).mappings().first()
    return None if row is None else StepRecord.from_row(row)


async def open_steps(conn: AsyncConnection, run_id: int, phase: str) -> list[StepRecord]:
    """The phase's unsettled steps, in order: what the tick walks through."""
    query = (
        sa.select(steps)
        .where(steps.c.run_id == run_id, steps.c.phase == phase, steps.c.status.in_(STEP_OPEN))
        .order_by(steps.c.seq, steps.c.id)
    )
    return [StepRecord.from_row(row) for row in (await conn.execute(query)).mappings().all()]


def _claim_statement(with_version: bool) -> sa.Update:
    run_still_ours = (
        sa.select(sa.literal(1))
        .where(
            runs.c.id == sa.bindparam("b_run"),
            runs.c.status == RunStatus.RUNNING,
            runs.c.claimed_by == sa.bindparam("b_owner"),
        )
        .exists()
    )
    recorded: dict[str, Any] = {"action_version": sa.bindparam("b_version")} if with_version else {}
    return (
        sa.update(steps)
        .where(
            steps.c.id == sa.bindparam("b_step"),
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
_CLAIM = {True: _claim_statement(True), False: _claim_statement(False)}


async def claim(
    conn: AsyncConnection,
    step_id: int,
    *,
    run_id: int,
    owner: str,
    lease_until: dt.datetime,
    now: dt.datetime,
    action_version: int | None = None,
) -> bool:
    """``pending -> running`` (leased), only if due and only while *our* lease holds a run that
    is still ``running``. Folding the run's status into the claim is how a pause pressed
    mid-batch stops the batch at the very next step, without a separate read. The version of
    the action about to perform it is recorded (none when nobody registered the action)."""
    parameters = {"b_step": step_id, "b_run": run_id, "b_owner": owner, "b_lease": lease_until, "b_at": now}
    if action_version is not None:
        parameters["b_version"] = action_version
    result = await conn.execute(_CLAIM[action_version is not None], parameters)
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
    return sa.and_(_leased_by(step_id, owner), _run_settles)


def _released(now: dt.datetime) -> dict[str, Any]:
    """The lease let go: no runner holds the step, and the reclaim has nothing to expire."""
    return {"claimed_by": None, "claim_expires_at": None, "updated_at": now}


def _answered(result: Any) -> dict[str, Any]:
    """What the action answered, stored only when it answered something (an empty answer
    leaves an earlier one in place)."""
    return {} if result is None else {"result": result}


def _ended(status: StepStatus, now: dt.datetime, result: Any = None) -> dict[str, Any]:
    """A leased step settled for good: its end status and time, the lease let go."""
    return {"status": status, "finished_at": now, **_released(now), **_answered(result)}


async def finish(
    conn: AsyncConnection,
    step_id: int,
    owner: str,
    status: StepStatus,
    now: dt.datetime,
    *,
    error: str | None = None,
    result: Any = None,
) -> bool:
    """Settle a step we hold the lease of (``done`` or ``failed``)."""
    parameters = {"b_step": step_id, "b_owner": owner, "b_status": status, "b_at": now}
    parameters["b_error"] = error[:500] if error else None
    if result is not None:
        parameters["b_result"] = result
    outcome = await conn.execute(_FINISH[result is not None], parameters)
    return outcome.rowcount == 1


def _finish_statement(with_result: bool) -> sa.Update:
    ours = sa.and_(
        steps.c.id == sa.bindparam("b_step"),
        steps.c.status == StepStatus.RUNNING,
        steps.c.claimed_by == sa.bindparam("b_owner"),
        steps.c.claim_expires_at.is_not(None),
        _run_settles,
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
_FINISH = {True: _finish_statement(True), False: _finish_statement(False)}


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
        .where(_leased_by(step_id, owner), ~_run_settles)
        .values(**_ended(StepStatus.CANCELLED, now, result))
    )
    return outcome.rowcount == 1


async def reschedule(
    conn: AsyncConnection, step_id: int, owner: str, due_at: dt.datetime, error: str, now: dt.datetime
) -> bool:
    """A transient failure with attempts left: back to pending at ``due_at``. ``attempts`` is
    untouched; the claim already counted this attempt."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(_ours(step_id, owner))
        .values(
            status=StepStatus.PENDING,
            due_at=due_at,
            last_error=error[:500],
            **_released(now),
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


async def has_pending_after(conn: AsyncConnection, run_id: int, phase: str, after_seq: int) -> bool:
    query = sa.select(sa.literal(1)).where(
        steps.c.run_id == run_id,
        steps.c.phase == phase,
        steps.c.seq > after_seq,
        steps.c.status == StepStatus.PENDING,
    )
    return (await conn.execute(query.limit(1))).first() is not None


async def stale(conn: AsyncConnection, now: dt.datetime) -> list[StaleStep]:
    """Leased steps whose lease has run out (their runner died or hung). Parked steps have a
    NULL lease and never appear here, however long they wait."""
    query = sa.select(steps.c.id, steps.c.run_id, steps.c.attempts).where(
        _stale, steps.c.claim_expires_at < now
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
    scope = [_stale, steps.c.claim_expires_at < now]
    if step_ids is not None:
        if not step_ids:
            return Reclaimed(0, 0)
        scope.append(steps.c.id.in_(step_ids))
    # A step whose run was ended (cancelled, failed, missed) while its runner was away has
    # nothing to go back to: handing it back would leave it pending on a dead run for ever.
    orphaned = await conn.execute(
        sa.update(steps).where(*scope, _run_ended_early).values(**_ended(StepStatus.CANCELLED, now))
    )
    gave_up = await conn.execute(
        sa.update(steps)
        .where(*scope, steps.c.attempts >= max_attempts)
        .values(last_error=GAVE_UP, **_ended(StepStatus.FAILED, now))
    )
    handed_back = await conn.execute(
        sa.update(steps).where(*scope).values(status=StepStatus.PENDING, **_released(now))
    )
    return Reclaimed(failed=gave_up.rowcount, reclaimed=handed_back.rowcount, cancelled=orphaned.rowcount)


async def confirm_parked(
    conn: AsyncConnection, step_id: int, now: dt.datetime, *, actor: Actor | str | None, note: str | None
) -> bool:
    """A human confirms a parked cue. A leased step is somebody's dispatch in progress and is
    refused; a second confirm matches nothing and is told 0."""
    return await _settle_by_human(conn, step_id, _parked, StepStatus.DONE, now, actor, note)


async def skip_by_human(
    conn: AsyncConnection,
    step_id: int,
    now: dt.datetime,
    *,
    actor: Actor | str | None,
    note: str | None,
    parked_only: bool = False,
) -> bool:
    """A pending step or a parked cue; never a leased one, never a failed one (resume carries a
    phase past a failed step). ``parked_only``: a cue's own Skip button, which may only answer
    the cue it was posted with, never skip a step that has not been reached."""
    guard = _parked if parked_only else sa.or_(steps.c.status == StepStatus.PENDING, _parked)
    return await _settle_by_human(conn, step_id, guard, StepStatus.SKIPPED, now, actor, note)


async def _settle_by_human(
    conn: AsyncConnection,
    step_id: int,
    guard: sa.ColumnElement[bool],
    status: StepStatus,
    now: dt.datetime,
    actor: Actor | str | None,
    note: str | None,
) -> bool:
    if isinstance(actor, str):
        # A caller that still hands over a bare name (the command line's "cli" and the like).
        actor = Actor(None, actor)
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.id == step_id, guard, _run_not_ended)
        .values(
            status=status,
            finished_at=now,
            claimed_by=None,
            settled_by_id=actor.id if actor else None,
            settled_by_name=actor.name[:100] if actor else None,
            note=note[:500] if note else None,
            updated_at=now,
        )
    )
    return outcome.rowcount == 1


async def requeue(conn: AsyncConnection, step_id: int, now: dt.datetime) -> bool:
    """A failed step back to pending, due now, with a fresh attempt budget."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.id == step_id, steps.c.status == StepStatus.FAILED)
        .values(
            status=StepStatus.PENDING,
            attempts=0,
            due_at=None,
            last_error=None,
            finished_at=None,
            **_released(now),
        )
    )
    return outcome.rowcount == 1


async def parked_cues(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(steps).where(steps.c.run_id == run_id, _parked).order_by(steps.c.seq)
    return (await conn.execute(query)).mappings().all()


async def cancel_open(conn: AsyncConnection, run_id: int, now: dt.datetime) -> int:
    """Pending steps and parked cues are cancelled; a leased step is left alone, because
    nothing can recall a command already sent."""
    outcome = await conn.execute(
        sa.update(steps)
        .where(steps.c.run_id == run_id, sa.or_(steps.c.status == StepStatus.PENDING, _parked))
        .values(status=StepStatus.CANCELLED, finished_at=now, claimed_by=None, updated_at=now)
    )
    return outcome.rowcount


async def last_started_seq(conn: AsyncConnection, run_id: int, phase: str) -> int | None:
    """The furthest step of the phase that has been started (anything but pending).

    Not "the lowest unsettled seq": after a phase carried on past an ``on_failure: skip``
    failure and then paused at a later one, that would name a step behind the cursor.
    """
    query = sa.select(sa.func.max(steps.c.seq)).where(
        steps.c.run_id == run_id, steps.c.phase == phase, steps.c.status != StepStatus.PENDING
    )
    value = (await conn.execute(query)).scalar()
    return None if value is None else int(value)


async def at_seq(conn: AsyncConnection, run_id: int, phase: str, seq: int) -> Row | None:
    query = sa.select(steps).where(steps.c.run_id == run_id, steps.c.phase == phase, steps.c.seq == seq)
    return (await conn.execute(query)).mappings().first()


async def list_for_run(conn: AsyncConnection, run_id: int) -> list[StepRecord]:
    query = sa.select(steps).where(steps.c.run_id == run_id).order_by(steps.c.id)
    return [StepRecord.from_row(row) for row in (await conn.execute(query)).mappings()]
