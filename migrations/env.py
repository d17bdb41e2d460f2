"""Alembic environment. Runs on the connection handed in by ``runner.migrate`` (the same engine
factory every process uses); the ``alembic`` command line works too, with the URL from
``EVENTBOT_DATABASE_URL`` or ``sqlalchemy.url``."""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from runner.db import DEFAULT_URL, create_engine
from runner.schema import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        compare_server_default=False,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


connection = config.attributes.get("connection")
if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or DEFAULT_URL,
        target_metadata=metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
elif connection is not None:
    _run(connection)
else:
    asyncio.run(
        _run_async(
            os.environ.get("EVENTBOT_DATABASE_URL") or config.get_main_option("sqlalchemy.url") or DEFAULT_URL
        )
    )
