"""``event_external_claims`` and ``event_work_leases``: two processes, active-active, on one
database.

A claim row is inserted for each external event (a Discord interaction) before anything acts on
it: its primary key lets exactly one of the processes that received the event handle it. A work
lease row names a piece of work one process does at a time (the staff log, the live messages,
the Events-tab mirror): who holds it, until when, and where it got to.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_external_claims",
        sa.Column("external_id", sa.String(length=64), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=False),
        sa.Column("claimed_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("external_id"),
    )
    op.create_index("idx_evclaim_at", "event_external_claims", ["claimed_at"])
    op.create_table(
        "event_work_leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", _when(), nullable=False),
        sa.Column("position", _big_id(), nullable=True),
        sa.Column("done", sa.JSON(), nullable=True),
        sa.Column("updated_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("event_work_leases")
    op.drop_index("idx_evclaim_at", table_name="event_external_claims")
    op.drop_table("event_external_claims")
