"""Statements on ``event_attendee_grants``, and the read of who should hold an attendee role:
the members confirmed in runs still in flight (rehearsals give no roles)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore
from runner.schema import attendee_grants, runs, signups
from runner.states import RUN_IN_FLIGHT, SignupStatus

Row = sa.RowMapping


async def confirmed_in_flight(conn: AsyncConnection) -> Sequence[Row]:
    """(run_id, version_id, member_id) of every confirmed sign-up of a live run in flight."""
    query = (
        sa.select(signups.c.run_id, runs.c.version_id, signups.c.member_id)
        .join(runs, runs.c.id == signups.c.run_id)
        .where(
            signups.c.status == SignupStatus.CONFIRMED.value,
            runs.c.status.in_([s.value for s in RUN_IN_FLIGHT]),
            runs.c.rehearsal.is_(sa.false()),
        )
    )
    return (await conn.execute(query)).mappings().all()


async def grants(conn: AsyncConnection) -> Sequence[Row]:
    t = attendee_grants.c
    query = sa.select(t.role_id, t.member_id, t.held_before, t.given, t.stopped)
    return (await conn.execute(query)).mappings().all()


async def record(
    conn: AsyncConnection, role_id: str, member_id: str, now: dt.datetime, *, held_before: bool, given: bool
) -> None:
    await conn.execute(
        insert_ignore(conn, attendee_grants).values(
            role_id=role_id, member_id=member_id, granted_at=now, held_before=held_before, given=given
        )
    )


async def given(conn: AsyncConnection, role_id: str, member_id: str) -> None:
    await conn.execute(_update(role_id, member_id).values(given=True))


async def stopped(conn: AsyncConnection, role_id: str, member_id: str, reason: str) -> None:
    await conn.execute(_update(role_id, member_id).values(stopped=reason))


async def revoked(conn: AsyncConnection, role_id: str, member_id: str) -> None:
    await conn.execute(
        sa.delete(attendee_grants).where(
            attendee_grants.c.role_id == role_id, attendee_grants.c.member_id == member_id
        )
    )


def _update(role_id: str, member_id: str) -> sa.Update:
    return sa.update(attendee_grants).where(
        attendee_grants.c.role_id == role_id, attendee_grants.c.member_id == member_id
    )
