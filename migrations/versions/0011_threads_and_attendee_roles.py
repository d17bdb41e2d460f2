"""Event threads and attendee roles: ``event_run_threads`` (the thread a ``discord.thread`` step
started on a run's announcement), ``event_thread_members`` (the attendees added to it) and
``event_attendee_grants`` (who the bot gave an ``attendee_role``).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_run_threads",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("thread_id", sa.String(length=32), nullable=False),
        sa.Column("step_id", _big_id(), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("archived_at", _when(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evthread_run"),
        sa.PrimaryKeyConstraint("run_id", "thread_id"),
    )
    op.create_index("idx_evthread_open", "event_run_threads", ["archived_at"])
    op.create_table(
        "event_thread_members",
        sa.Column("thread_id", sa.String(length=32), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("added_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "member_id"),
    )
    op.create_table(
        "event_attendee_grants",
        sa.Column("role_id", sa.String(length=32), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("granted_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("role_id", "member_id"),
    )


def downgrade() -> None:
    op.drop_table("event_attendee_grants")
    op.drop_table("event_thread_members")
    op.drop_index("idx_evthread_open", table_name="event_run_threads")
    op.drop_table("event_run_threads")
