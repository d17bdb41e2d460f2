"""Frozen records built from rows at the SQL boundary (procrastinate's ``Job.from_row``).

The sql modules' readers hand these out instead of row mappings, so the engine reads
``run.status`` (a ``RunStatus``) rather than ``run["status"]`` (a string anyone may misspell),
and a record cannot be changed on its way through a tick: what was read is what was read.

``from_row`` takes the columns a query selected; a reader that selects fewer columns builds the
smaller record meant for it (``DueRun``, ``OverdueRun``, ``StaleStep``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from runner.kinds import Actor
from runner.states import CleanupStatus, Health, OnFailure, RunStatus, StepStatus


class _Record:
    """``record["status"]``: for readers not yet moved to attributes (the controls and views
    read rows by key); goes once none does."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.__dataclass_fields__

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.__dataclass_fields__ else default

    @classmethod
    def _columns(cls, row: Mapping[Any, Any]) -> dict[str, Any]:
        # A field with a default may be missing from a row that selected only some columns.
        fields = cls.__dataclass_fields__
        return {
            name: row[name] for name, f in fields.items() if name in row or f.default is dataclasses.MISSING
        }


@dataclass(frozen=True)
class RunRecord(_Record):
    id: int
    definition_id: int
    version_id: int
    scope: str
    status: RunStatus
    health: Health
    current_phase: str | None
    scheduled_for: dt.datetime
    # The schedule's moment this run is the occurrence of; ``None`` for a manual start.
    occurrence_at: dt.datetime | None
    concurrency_key: str | None
    rehearsal: bool
    started_by: str | None
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    claimed_by: str | None
    claim_expires_at: dt.datetime | None
    last_error: str | None
    wake_at: dt.datetime | None
    held_until: dt.datetime | None
    blocked_by: int | None
    concurrency_slot: str | None
    nudges: int
    created_at: dt.datetime
    updated_at: dt.datetime
    # What a cancel's cleanup got to (``runner.engine.cleanup``).
    cleanup_status: CleanupStatus = CleanupStatus.NOT_REQUIRED

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        values = cls._columns(row)
        values.update(
            id=int(row["id"]),
            status=RunStatus(row["status"]),
            cleanup_status=CleanupStatus(row.get("cleanup_status") or CleanupStatus.NOT_REQUIRED),
            health=Health(row["health"]),
            rehearsal=bool(row["rehearsal"]),
            nudges=int(row["nudges"]),
            blocked_by=None if row["blocked_by"] is None else int(row["blocked_by"]),
        )
        return cls(**values)


@dataclass(frozen=True)
class DueRun(_Record):
    """What the due query selects: enough to take the run (and its concurrency key)."""

    id: int
    status: RunStatus
    concurrency_key: str | None
    # A scheduled run due before this is due for its reminders, not for its start.
    scheduled_for: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(int(row["id"]), RunStatus(row["status"]), row["concurrency_key"], row.get("scheduled_for"))


@dataclass(frozen=True)
class OverdueRun(_Record):
    """A run in progress past its wake that no live lease holds."""

    id: int
    status: RunStatus
    health: Health
    wake_at: dt.datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(int(row["id"]), RunStatus(row["status"]), Health(row["health"]), row["wake_at"])


@dataclass(frozen=True)
class StepRecord(_Record):
    id: int
    run_id: int
    phase: str
    seq: int
    label: str | None
    action_id: str
    params: dict[str, Any] | None
    action_version: int
    status: StepStatus
    due_at: dt.datetime | None
    attempts: int
    on_failure: OnFailure
    idempotency_key: str
    claimed_by: str | None
    claim_expires_at: dt.datetime | None
    last_error: str | None
    result: Any
    settled_by_id: str | None
    settled_by_name: str | None
    note: str | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    # Who approved it, when its action's risk needed an approval (``runner.approvals``).
    approved_by_id: str | None = None
    approved_by_name: str | None = None
    approved_at: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        values = cls._columns(row)
        values.update(
            id=int(row["id"]),
            run_id=int(row["run_id"]),
            seq=int(row["seq"]),
            status=StepStatus(row["status"]),
            attempts=int(row["attempts"]),
            on_failure=OnFailure(row["on_failure"]),
        )
        return cls(**values)

    @property
    def settled_by(self) -> Actor | None:
        """Who confirmed or skipped it by hand."""
        if self.settled_by_name is None:
            return None
        return Actor(self.settled_by_id, self.settled_by_name)

    @property
    def parked(self) -> bool:
        """A cue waiting for a human: running with no lease. Only a human moves it."""
        return self.status is StepStatus.RUNNING and self.claim_expires_at is None

    @property
    def leased(self) -> bool:
        """A runner is dispatching it (or died doing so, and the reclaim will hand it back)."""
        return self.status is StepStatus.RUNNING and self.claim_expires_at is not None


@dataclass(frozen=True)
class StaleStep(_Record):
    """A leased step whose lease ran out, as the reclaim reads it."""

    id: int
    run_id: int
    # As read before the reclaim: what its give-up decides on (``>= max_attempts``).
    attempts: int
    # The runner whose lease ran out: taken for dead, so its lease on the run goes too.
    owner: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(int(row["id"]), int(row["run_id"]), int(row["attempts"]), row.get("claimed_by"))
