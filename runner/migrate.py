"""Schema migrations, run through the engine every process uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.ext.asyncio import AsyncEngine

from runner.schema import metadata

SCRIPTS = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPTS))
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """``alembic upgrade head`` on ``engine``'s database."""

    def run(connection: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    async with engine.begin() as conn:
        await conn.run_sync(run)


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
        return await conn.run_sync(read)
