"""Statements on ``event_run_steps``: creating a phase's steps (each with its idempotency key,
drawn once) and reading them.

The engine's leases on a step are ``step_leases``; a person's settles are ``step_settles``; the
conditions both test (leased, parked, the run's status) are ``step_guards``. ``attempts`` has
exactly one writer: the claim.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.records import StepRecord
from runner.schema import steps
from runner.sql import step_guards as guards
from runner.states import STEP_OPEN, OnFailure, StepStatus

Row = sa.RowMapping


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


async def has_pending_after(conn: AsyncConnection, run_id: int, phase: str, after_seq: int) -> bool:
    query = sa.select(sa.literal(1)).where(
        steps.c.run_id == run_id,
        steps.c.phase == phase,
        steps.c.seq > after_seq,
        steps.c.status == StepStatus.PENDING,
    )
    return (await conn.execute(query.limit(1))).first() is not None


async def parked_cues(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(steps).where(steps.c.run_id == run_id, guards.parked).order_by(steps.c.seq)
    return (await conn.execute(query)).mappings().all()


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


async def status_by_label(conn: AsyncConnection, run_id: int, label: str) -> StepStatus | None:
    """The status of the run's latest step labelled ``label`` (a cue a condition names)."""
    query = (
        sa.select(steps.c.status)
        .where(steps.c.run_id == run_id, steps.c.label == label)
        .order_by(steps.c.id.desc())
        .limit(1)
    )
    found = (await conn.execute(query)).scalar()
    return StepStatus(found) if found is not None else None
