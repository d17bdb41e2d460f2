"""The cleanup ledger: ``event_run_undos`` (what each step did that a cancel with cleanup undoes,
in reverse order, each once) and ``event_runs.cleanup_status`` (the seeds' column: not_required,
pending, done, failed; existing runs have nothing to undo).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLEANUP = ("not_required", "pending", "done", "failed")
UNDO = ("recorded", "running", "done", "failed", "manual")


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # A plain ADD COLUMN, not a batch: on SQLite a batch copies event_runs and drops the old
    # table, which the steps' and sign-ups' foreign keys refuse once runs exist. SQLite cannot
    # add a CHECK that way, so there the column is a plain VARCHAR (MariaDB's is a native ENUM,
    # which refuses a value outside the list by itself).
    op.add_column(
        "event_runs",
        sa.Column(
            "cleanup_status",
            sa.Enum(*CLEANUP, name="run_cleanup_status", create_constraint=False),
            server_default="not_required",
            nullable=False,
        ),
    )
    op.create_table(
        "event_run_undos",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("step_id", _big_id(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("action_id", sa.String(length=96), nullable=True),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("idempotency_key", sa.String(length=48), nullable=False),
        sa.Column("status", sa.Enum(*UNDO, name="undo_status", create_constraint=True), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("claim_expires_at", _when(), nullable=True),
        sa.Column("retry_at", _when(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("finished_at", _when(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evundo_run"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("step_id", name="uq_evundo_step"),
    )
    op.create_index("idx_evundo_run", "event_run_undos", ["run_id", "status"])


def downgrade() -> None:
    op.drop_index("idx_evundo_run", table_name="event_run_undos")
    op.drop_table("event_run_undos")
    op.drop_column("event_runs", "cleanup_status")
