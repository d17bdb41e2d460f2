"""Schema migrations, run through the engine every process uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner.db import on_galera
from runner.schema import metadata

SCRIPTS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    return config


async def _causal_reads(conn: AsyncConnection, on: bool) -> None:
    """On a Galera node, make this session's reads wait until the node has applied every write
    the cluster committed before them (``wsrep_sync_wait = 1``), or stop doing so.

    A node applies other nodes' writes a moment after they commit: right after ``migrate``
    through node 0, node 2 could still read the old ``alembic_version``, run a migration again
    and fail on a table that exists (seen in the cluster tests), or refuse to start the bot as
    "schema behind". Only the schema's reads need this; elsewhere every decision is a
    compare-and-set that the cluster certifies at COMMIT. A server without Galera has no
    ``wsrep_on`` (or has it OFF): nothing is changed there."""
    if on_galera(conn):
        await conn.exec_driver_sql(f"SET SESSION wsrep_sync_wait = {1 if on else 0}")


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """``alembic upgrade head`` on ``engine``'s database."""

    def run(connection: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    async with engine.begin() as conn:
        await _causal_reads(conn, True)
        try:
            await conn.run_sync(run)
        finally:
            await _causal_reads(conn, False)


async def drift(engine: AsyncEngine) -> list[Any]:
    """Differences between the database and ``runner.schema`` (empty when they agree)."""

    def compare(connection: Any) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))

    async with engine.connect() as conn:
        return await conn.run_sync(compare)


async def current_revision(engine: AsyncEngine) -> str | None:
    def read(connection: Any) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as conn:
        await _causal_reads(conn, True)
        try:
            return await conn.run_sync(read)
        finally:
            await _causal_reads(conn, False)
