"""Reminders by direct message (``to: attendees``): ``event_reminder_dms`` (one row per member and
reminder of a run, written once, claimed before it is sent, settled once) and
``member_dm_settings`` (a member who turned them off with ``/reminders off``).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Two new tables: plain create_table on every backend (no batch, nothing existing is copied).
    op.create_table(
        "event_reminder_dms",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step_id", _big_id(), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("content", sa.String(length=2000), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("lease_until", _when(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("settled_at", _when(), nullable=True),
        sa.Column("settled_as", sa.String(length=16), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evremdm_run"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "seq", "member_id", name="uq_evremdm_once"),
    )
    op.create_index("idx_evremdm_open", "event_reminder_dms", ["settled_at", "lease_until"])
    op.create_table(
        "member_dm_settings",
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("reminders_off", sa.Boolean(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("member_id"),
    )


def downgrade() -> None:
    op.drop_table("member_dm_settings")
    op.drop_index("idx_evremdm_open", table_name="event_reminder_dms")
    op.drop_table("event_reminder_dms")
