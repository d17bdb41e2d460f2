"""Retention: ``event_run_summaries`` and an index on ``event_runs.ended_at``.

The run log and the steps of runs that ended longer ago than the configured period are pruned
in small batches; each pruned run keeps its row in ``event_runs`` and gains one summary row
(who started it, who ended it and why, how its steps ended, how many log lines it had). The
index lets the pruning find the runs ended before its cut-off without reading every run.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_index("idx_evrun_ended", "event_runs", ["ended_at"])
    op.create_table(
        "event_run_summaries",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("ended_at", _when(), nullable=False),
        sa.Column("started_by_id", sa.String(length=64), nullable=True),
        sa.Column("started_by_name", sa.String(length=100), nullable=True),
        sa.Column("ended_by_id", sa.String(length=64), nullable=True),
        sa.Column("ended_by_name", sa.String(length=100), nullable=True),
        sa.Column("ended_why", sa.String(length=500), nullable=True),
        sa.Column("steps", sa.JSON(), nullable=True),
        sa.Column("reminders", sa.JSON(), nullable=True),
        sa.Column("log_lines", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("pruned_at", _when(), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evsum_run"),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index("idx_evsum_ended", "event_run_summaries", ["ended_at"])
    op.create_index("idx_evsum_pruning", "event_run_summaries", ["pruned_at", "run_id"])


def downgrade() -> None:
    op.drop_index("idx_evsum_pruning", table_name="event_run_summaries")
    op.drop_index("idx_evsum_ended", table_name="event_run_summaries")
    op.drop_table("event_run_summaries")
    op.drop_index("idx_evrun_ended", table_name="event_runs")
