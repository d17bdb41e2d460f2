"""``runner_processes``: a heartbeat row per serving process (the bot), for ``health``.

Written by the process's loop at most once per tick interval (one upsert), deleted when it closes
cleanly; keyed by the runner's owner string, the one its run and step leases carry.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "runner_processes",
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=64), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", _when(), nullable=False),
        sa.Column("last_seen", _when(), nullable=False),
        sa.Column("interval_ms", sa.Integer(), nullable=False),
        sa.Column("last_tick_at", _when(), nullable=True),
        sa.Column("tick_lag_ms", sa.Integer(), nullable=True),
        sa.Column("tick_ms", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("owner"),
    )


def downgrade() -> None:
    op.drop_table("runner_processes")
