"""The run log's one reader: stored lines back as typed ``Entry`` values, and how a run ended."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.history.events import Event, RunStatusChanged, parse_event
from runner.kinds import Actor, Kind
from runner.sql import retention as retention_sql
from runner.sql import run_log as run_log_sql
from runner.states import RunStatus


def _actor_of(row: Mapping[Any, Any]) -> Actor | None:
    name = row.get("actor_name")
    if name is None:
        return None
    return Actor(None if row.get("actor_id") is None else str(row["actor_id"]), str(name))


@dataclass(frozen=True)
class Entry:
    id: int
    run_id: int
    step_id: int | None
    at: dt.datetime
    actor: Actor | None
    kind: str
    event: Event

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Entry:
        return cls(
            id=int(row["id"]),
            run_id=int(row["run_id"]),
            step_id=None if row["step_id"] is None else int(row["step_id"]),
            at=row["at"],
            actor=_actor_of(row),
            kind=str(row["kind"]),
            event=parse_event(str(row["kind"]), row["detail"]),
        )

    @property
    def detail(self) -> dict[str, Any]:
        """The stored detail, for readers that want the raw keys."""
        return self.event.detail()


async def entries_for_run(conn: AsyncConnection, run_id: int) -> Sequence[Entry]:
    return [Entry.from_row(row) for row in await run_log_sql.for_run(conn, run_id)]


async def entries_followed(
    conn: AsyncConnection, follower: run_log_sql.LogFollower, limit: int = 100
) -> tuple[list[Entry], bool]:
    """The lines ``follower`` has not delivered yet (``LogFollower.read``), as entries; and
    whether more are waiting past them."""
    rows, more = await follower.read(conn, limit)
    return [Entry.from_row(row) for row in rows], more


@dataclass(frozen=True)
class RunEnding:
    """How a run came to an end, for a front end to word: the status it ended in, who ended it
    when a person did, and why (a cancel's reason, a failure's error). Front ends name the
    person their own way (a mention in Discord), which is why this is data and not a sentence."""

    # ``None``: the run was gone (deleted) by the time it was looked at.
    status: RunStatus | None
    by: Actor | None = None
    why: str | None = None


async def how_run_ended(
    conn: AsyncConnection, run_id: int, status: RunStatus, last_error: str | None
) -> RunEnding:
    """The run's last ``run.status`` line says who moved it and why; a run whose history lacks
    that line (or predates the fields) still has its ``last_error``. A run whose history
    retention pruned answers from the summary taken from that line before it went."""
    kept = await retention_sql.summary_of(conn, run_id)
    if kept is not None:
        by = None if kept["ended_by_name"] is None else Actor(kept["ended_by_id"], str(kept["ended_by_name"]))
        return RunEnding(status, by=by, why=kept["ended_why"] or last_error)
    row = await run_log_sql.latest_of_kind(conn, run_id, Kind.RUN_STATUS)
    return ending_from(Entry.from_row(row) if row is not None else None, status, last_error)


def ending_from(entry: Entry | None, status: RunStatus, last_error: str | None) -> RunEnding:
    """How the run ended, from its last ``run.status`` line (``entry``), if that line is the one
    that moved it to ``status``."""
    if entry is None or not isinstance(entry.event, RunStatusChanged) or entry.event.to != status:
        return RunEnding(status, why=last_error)
    event = entry.event
    return RunEnding(status, by=entry.actor, why=event.reason or event.error or last_error)
