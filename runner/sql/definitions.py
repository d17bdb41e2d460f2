"""Statements on ``event_definitions`` and ``event_versions``.

A version is immutable once written: publishing inserts a new row or, for identical content,
nothing at all. A run pins the version it was created from.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.schema import definitions, versions

Row = sa.RowMapping


async def by_key(conn: AsyncConnection, key: str) -> Row | None:
    return (await conn.execute(_BY_KEY, {"b_key": key})).mappings().first()


# Built once: every start sends it.
_BY_KEY = sa.select(definitions).where(definitions.c.key == sa.bindparam("b_key"))


async def by_id(conn: AsyncConnection, definition_id: int) -> Row | None:
    query = sa.select(definitions).where(definitions.c.id == definition_id)
    return (await conn.execute(query)).mappings().first()


async def insert_definition(
    conn: AsyncConnection, *, key: str, title: str, grace_seconds: int, now: dt.datetime
) -> int:
    result = await conn.execute(
        sa.insert(definitions).values(
            key=key, title=title, grace_seconds=grace_seconds, created_at=now, updated_at=now
        )
    )
    inserted = result.inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


async def latest_version(conn: AsyncConnection, definition_id: int) -> Row | None:
    query = (
        sa.select(versions)
        .where(versions.c.definition_id == definition_id)
        .order_by(versions.c.version.desc())
        .limit(1)
    )
    return (await conn.execute(query)).mappings().first()


async def version_history(conn: AsyncConnection, definition_id: int) -> Sequence[Row]:
    """Every version's id and publishing time, oldest first: which version was in force when."""
    query = (
        sa.select(versions.c.id, versions.c.published_at)
        .where(versions.c.definition_id == definition_id)
        .order_by(versions.c.published_at, versions.c.id)
    )
    return (await conn.execute(query)).mappings().all()


async def version(conn: AsyncConnection, version_id: int) -> Row | None:
    return (await conn.execute(sa.select(versions).where(versions.c.id == version_id))).mappings().first()


async def insert_version(
    conn: AsyncConnection,
    *,
    definition_id: int,
    number: int,
    content_hash: str,
    spec: dict[str, Any],
    source: str | None,
    published_by: str | None,
    now: dt.datetime,
) -> int:
    result = await conn.execute(
        sa.insert(versions).values(
            definition_id=definition_id,
            version=number,
            content_hash=content_hash,
            spec=spec,
            source=source,
            published_by=published_by,
            published_at=now,
        )
    )
    inserted = result.inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


async def point_at_version(
    conn: AsyncConnection,
    definition_id: int,
    version_id: int,
    *,
    title: str,
    grace_seconds: int,
    now: dt.datetime,
) -> None:
    await conn.execute(
        sa.update(definitions)
        .where(definitions.c.id == definition_id)
        .values(
            current_version_id=version_id,
            title=title,
            grace_seconds=grace_seconds,
            # A new version may carry a new schedule: its occurrences are worked out afresh from
            # now on. What the old version had not reached yet (the runner was down) is kept:
            # the engine works those out under the version that was current at the time.
            materialised_until=sa.case(
                (definitions.c.materialised_until > now, now - dt.timedelta(microseconds=1)),
                else_=definitions.c.materialised_until,
            ),
            updated_at=now,
        )
    )


async def list_all(conn: AsyncConnection) -> Sequence[Row]:
    query = (
        sa.select(definitions, versions.c.version, versions.c.spec)
        .join(versions, versions.c.id == definitions.c.current_version_id)
        .order_by(definitions.c.key)
    )
    return (await conn.execute(query)).mappings().all()


# The columns the tick's occurrence stage needs, without the version's spec: the definitions
# themselves come from the version cache, and decoding every spec's JSON each pass made the
# housekeeping of 100 events cost more than all its queries.
_SCHEDULE_BOOKKEEPING = sa.select(
    definitions.c.id, definitions.c.key, definitions.c.current_version_id, definitions.c.materialised_until
).order_by(definitions.c.key)


async def list_for_materialising(conn: AsyncConnection) -> Sequence[Row]:
    return (await conn.execute(_SCHEDULE_BOOKKEEPING)).mappings().all()


async def set_materialised_until(conn: AsyncConnection, definition_id: int, until: dt.datetime) -> None:
    await conn.execute(
        sa.update(definitions).where(definitions.c.id == definition_id).values(materialised_until=until)
    )
