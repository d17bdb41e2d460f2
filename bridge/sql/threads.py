"""Statements on ``event_run_threads`` and ``event_thread_members``: the thread a
``discord.thread`` step started on a run's announcement, and the attendees the bot has added to it
(a row is deleted once Discord accepted taking that member out again).

Recording a thread is an ``INSERT IGNORE``: a step retried after a crash derives the same thread
id (a thread started from a message has the message's id) and records it again harmlessly.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.definitions.model import REMINDERS_PHASE
from runner.schema import run_threads, runs, steps, thread_members
from runner.states import RUN_IN_FLIGHT, RUN_TERMINAL, StepStatus

Row = sa.RowMapping
ANNOUNCE_ACTION = "discord.announce"


async def announcements(conn: AsyncConnection, run_id: int, label: str | None) -> Sequence[Row]:
    """The run's posted announcements (its phases' steps, not its reminders), latest first;
    only those labelled ``label`` when one is given."""
    query = (
        sa.select(steps.c.id, steps.c.label, steps.c.result)
        .where(
            steps.c.run_id == run_id,
            steps.c.action_id == ANNOUNCE_ACTION,
            steps.c.status == StepStatus.DONE.value,
            steps.c.phase != REMINDERS_PHASE,
        )
        .order_by(steps.c.id.desc())
    )
    if label is not None:
        query = query.where(steps.c.label == label)
    return (await conn.execute(query)).mappings().all()


async def record(
    conn: AsyncConnection, run_id: int, step_id: int, channel_id: str, thread_id: str, now: dt.datetime
) -> None:
    await conn.execute(
        insert_ignore(conn, run_threads).values(
            run_id=run_id, thread_id=thread_id, step_id=step_id, channel_id=channel_id, created_at=now
        )
    )


async def of_run(conn: AsyncConnection, run_id: int) -> Sequence[Row]:
    query = sa.select(run_threads).where(run_threads.c.run_id == run_id).order_by(run_threads.c.created_at)
    return (await conn.execute(query)).mappings().all()


async def to_archive(conn: AsyncConnection, limit: int) -> Sequence[Row]:
    """Threads not archived yet whose run has ended."""
    query = (
        sa.select(run_threads)
        .join(runs, runs.c.id == run_threads.c.run_id)
        .where(run_threads.c.archived_at.is_(None), runs.c.status.in_([s.value for s in RUN_TERMINAL]))
        .order_by(run_threads.c.run_id)
        .limit(limit)
    )
    return (await conn.execute(query)).mappings().all()


async def of_runs_in_flight(conn: AsyncConnection) -> Sequence[Row]:
    """Open threads of runs still in flight: the ones attendees are added to."""
    query = (
        sa.select(run_threads)
        .join(runs, runs.c.id == run_threads.c.run_id)
        .where(run_threads.c.archived_at.is_(None), runs.c.status.in_([s.value for s in RUN_IN_FLIGHT]))
        .order_by(run_threads.c.run_id)
    )
    return (await conn.execute(query)).mappings().all()


async def archived(conn: AsyncConnection, run_id: int, thread_id: str, now: dt.datetime) -> None:
    await conn.execute(
        sa.update(run_threads)
        .where(run_threads.c.run_id == run_id, run_threads.c.thread_id == thread_id)
        .values(archived_at=now)
    )


async def members_added(conn: AsyncConnection, thread_id: str) -> set[str]:
    query = sa.select(thread_members.c.member_id).where(thread_members.c.thread_id == thread_id)
    return {str(m) for m in (await conn.execute(query)).scalars()}


async def member_added(conn: AsyncConnection, thread_id: str, member_id: str, now: dt.datetime) -> None:
    await conn.execute(
        insert_ignore(conn, thread_members).values(thread_id=thread_id, member_id=member_id, added_at=now)
    )


async def member_removed(conn: AsyncConnection, thread_id: str, member_id: str) -> None:
    await conn.execute(
        sa.delete(thread_members).where(
            thread_members.c.thread_id == thread_id, thread_members.c.member_id == member_id
        )
    )
