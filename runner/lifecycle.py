"""Moving a run: the one place a run's status changes, and the one writer of ``run.status``
lines (a run created already ``running`` under a ``Handover`` gets its lines here too).

``move_run`` is the guarded compare-and-set (0 rows: the run was no longer where the caller
thought) and, when it moved, its ``run.status`` line, in the caller's transaction. An edge that
``states.RUN_TRANSITIONS`` does not draw is a programming error and raises before touching the
database: no caller decides at run time whether ``completed -> running`` is legal.

Missed (the tick), failed by ``on_failure: abort_run`` (the tick) and cancelled (a human) also
cancel what the run still waits on (pending steps and parked cues, never a leased step: nothing
can recall a command already sent): ``cancel_open=True``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.history import Actor, PhaseStarted, RunStatusChanged, record
from runner.sql import run_leases, step_settles
from runner.sql import runs as runs_sql
from runner.states import RUN_TRANSITIONS, RunStatus

if TYPE_CHECKING:
    from runner import catalog


@dataclass(frozen=True)
class Claim:
    """The lease ``scheduled -> starting`` takes with the run (and its concurrency slot)."""

    owner: str
    until: dt.datetime


@dataclass(frozen=True)
class Handover:
    """A manual start the runner of the starting process drives at once (``Controls(driver=)``):
    the run is created leased to ``owner``, already ``running`` in its first phase, with its
    first step claimed (``step_lease_until``), so the first action goes out as soon as the
    creating transaction commits, with no tick in between."""

    owner: str
    run_lease_until: dt.datetime
    step_lease_until: dt.datetime
    action_version: int | None


async def record_born_running(conn: AsyncConnection, run_id: int, phase: str, now: dt.datetime) -> None:
    """The lines of a run created ``running`` under a ``Handover``: it passed ``scheduled ->
    starting -> running`` and entered ``phase`` in the statement that created it, and its
    history says so, line for line, as if it had been moved there one edge at a time."""
    _check_edges((RunStatus.SCHEDULED,), RunStatus.STARTING)
    _check_edges((RunStatus.STARTING,), RunStatus.RUNNING)
    await record(conn, run_id, RunStatusChanged(to=RunStatus.STARTING, from_=RunStatus.SCHEDULED), now)
    await record(conn, run_id, RunStatusChanged(to=RunStatus.RUNNING, from_=RunStatus.STARTING), now)
    await record(conn, run_id, PhaseStarted(phase), now)


def _froms(from_: RunStatus | str | Iterable[RunStatus | str]) -> tuple[RunStatus, ...]:
    if isinstance(from_, str):
        return (RunStatus(from_),)
    return tuple(RunStatus(each) for each in from_)


def _check_edges(froms: tuple[RunStatus, ...], to: RunStatus) -> None:
    refused = [each for each in froms if to not in RUN_TRANSITIONS[each] or each == to]
    if refused or not froms:
        raise ValueError(f"no run moves {'/'.join(refused) or '(nothing)'} -> {to}")


async def _move(
    conn: AsyncConnection,
    run_id: int,
    from_: RunStatus | str | Iterable[RunStatus | str],
    to: RunStatus | str,
    now: dt.datetime,
    *,
    actor: Actor | None,
    step_id: int | None,
    last_error: str | None,
    claim: Claim | None,
    cancel_open: bool,
    phase: str | None,
    wake_at: dt.datetime | None,
    fields: Mapping[str, Any],
    via: tuple[RunStatus, ...] = (),
    frees_a_key: bool = True,
) -> int | None:
    """Steps cancelled (0 unless ``cancel_open``), or ``None`` when the run did not move."""
    froms, target = _froms(from_), RunStatus(to)
    path = (froms, *((each,) for each in via))
    for here, there in zip(path, (*via, target), strict=True):
        _check_edges(here, there)
    if target is RunStatus.STARTING:
        # The start is the one move that also takes the lease and the concurrency slot.
        if claim is None:
            raise ValueError("scheduled -> starting takes the run's lease: pass claim=")
        moved = await run_leases.claim_start(conn, run_id, claim.owner, claim.until, now)
    else:
        moved = await runs_sql.transition(
            conn,
            run_id,
            froms,
            target,
            now,
            phase=phase,
            error=last_error,
            wake_at=wake_at,
            wake_waiters=frees_a_key,
        )
    if not moved:
        return None
    cancelled = await step_settles.cancel_open(conn, run_id, now) if cancel_open else None
    for passed in via:
        await record(
            conn, run_id, RunStatusChanged(to=passed, from_=froms[0] if len(froms) == 1 else None), now
        )
        froms = (passed,)
    event = RunStatusChanged(
        to=target,
        from_=froms[0] if len(froms) == 1 else None,
        steps_cancelled=cancelled,
        **fields,
    )
    await record(conn, run_id, event, now, step_id=step_id, actor=actor)
    return cancelled or 0


async def move_run(
    conn: AsyncConnection,
    run_id: int,
    from_: RunStatus | str | Iterable[RunStatus | str],
    to: RunStatus | str,
    now: dt.datetime,
    *,
    actor: Actor | None = None,
    step_id: int | None = None,
    last_error: str | None = None,
    claim: Claim | None = None,
    cancel_open: bool = False,
    phase: str | None = None,
    wake_at: dt.datetime | None = None,
    via: tuple[RunStatus, ...] = (),
    frees_a_key: bool = True,
    **fields: Any,
) -> bool:
    """Move the run from (one of) ``from_`` to ``to`` and write its ``run.status`` line.

    ``fields`` are the line's (``history.RunStatusChanged``: control, reason, error,
    scheduled_for); ``last_error``, ``phase`` and ``wake_at`` are what the move writes on the
    run row. False when the run was no longer in ``from_``; ``ValueError`` for an edge the state
    machine does not have.

    ``via`` walks statuses in between in the same statement, one line per edge (``running ->
    ending -> completed`` when the last step settles): every edge is still drawn and recorded,
    and nobody could have seen the run in between anyway. ``frees_a_key=False`` says the run
    holds no concurrency key, so an end has no waiters to wake.
    """
    moved = await _move(
        conn,
        run_id,
        from_,
        to,
        now,
        actor=actor,
        step_id=step_id,
        last_error=last_error,
        claim=claim,
        cancel_open=cancel_open,
        phase=phase,
        wake_at=wake_at,
        fields=fields,
        via=via,
        frees_a_key=frees_a_key,
    )
    return moved is not None


async def enter_phase(conn: AsyncConnection, run_id: int, phase: str, now: dt.datetime) -> bool:
    """``running -> running`` onto ``phase`` and its ``phase.started`` line. Not a status change
    (no ``run.status`` line); the guard "still running" is the answer wanted, which is why this
    one statement may match a row it does not change."""
    if not await runs_sql.transition(conn, run_id, RunStatus.RUNNING, RunStatus.RUNNING, now, phase=phase):
        return False
    await record(conn, run_id, PhaseStarted(phase), now)
    return True


class Driver(Protocol):
    """The runner of this process, handed the runs ``start`` creates (``runner.engine.Runner``)."""

    def handover(self, first_action_id: str, now: dt.datetime) -> Handover | None:
        """The leases a run started now would be created with, or ``None`` to decline (the
        runner is closing): the run is then created ``scheduled`` for any runner's tick."""
        ...

    def drive_started(self, started: catalog.StartedHere) -> None:
        """Drive a run created under this runner's ``handover``, once its transaction committed."""
        ...
