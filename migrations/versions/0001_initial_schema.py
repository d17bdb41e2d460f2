"""Initial schema: definitions, versions, runs, steps and the run log (see runner/schema.py).

Revision ID: 0001
Revises:
Create Date: 2026-11-29 16:56:01.676585
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_definitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("grace_seconds", sa.Integer(), server_default=sa.text("900"), nullable=False),
        sa.Column("current_version_id", sa.Integer(), nullable=True),
        sa.Column(
            "materialised_until",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "created_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key", name="uq_evdef_key"),
    )
    op.create_table(
        "event_run_log",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("step_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("kind", sa.String(length=48), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.Column(
            "at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("event_run_log", schema=None) as batch_op:
        batch_op.create_index("idx_evlog_run", ["run_id", "id"], unique=False)

    op.create_table(
        "event_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("definition_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(length=500), nullable=True),
        sa.Column("published_by", sa.String(length=100), nullable=True),
        sa.Column(
            "published_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["definition_id"], ["event_definitions.id"], name="fk_evver_definition"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("definition_id", "version", name="uq_evver_number"),
    )
    op.create_table(
        "event_runs",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("definition_id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=190), server_default="", nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "scheduled",
                "starting",
                "running",
                "paused",
                "ending",
                "completed",
                "cancelled",
                "failed",
                "missed",
                name="run_status",
                create_constraint=True,
            ),
            server_default="scheduled",
            nullable=False,
        ),
        sa.Column(
            "health",
            sa.Enum("ok", "degraded", "stalled", name="run_health", create_constraint=True),
            server_default="ok",
            nullable=False,
        ),
        sa.Column("current_phase", sa.String(length=64), nullable=True),
        sa.Column(
            "scheduled_for",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column("concurrency_key", sa.String(length=190), nullable=True),
        sa.Column("rehearsal", sa.Boolean(), server_default=sa.text("0"), nullable=False),
        sa.Column("started_by", sa.String(length=100), nullable=True),
        sa.Column(
            "started_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "ended_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column(
            "claim_expires_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column(
            "wake_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "held_until",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("blocked_by", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("concurrency_slot", sa.String(length=190), nullable=True),
        sa.Column("nudges", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["definition_id"], ["event_definitions.id"], name="fk_evrun_definition"),
        sa.ForeignKeyConstraint(["version_id"], ["event_versions.id"], name="fk_evrun_version"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("concurrency_slot", name="uq_evrun_concurrency_slot"),
        sa.UniqueConstraint("definition_id", "scope", "scheduled_for", name="uq_evrun_occurrence"),
    )
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.create_index("idx_evrun_concurrency", ["concurrency_key", "status"], unique=False)
        batch_op.create_index("idx_evrun_due", ["status", "scheduled_for"], unique=False)
        batch_op.create_index("idx_evrun_wake", ["wake_at"], unique=False)
        batch_op.create_index("idx_evrun_lease", ["claim_expires_at"], unique=False)

    op.create_table(
        "event_run_steps",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("phase", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("action_id", sa.String(length=96), nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("action_version", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "pending",
                "running",
                "done",
                "failed",
                "skipped",
                "refused",
                "cancelled",
                name="step_status",
                create_constraint=True,
            ),
            server_default="pending",
            nullable=False,
        ),
        sa.Column(
            "due_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "on_failure",
            sa.Enum("skip", "pause", "abort_run", name="step_on_failure", create_constraint=True),
            server_default="pause",
            nullable=False,
        ),
        sa.Column("idempotency_key", sa.String(length=40), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column(
            "claim_expires_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("settled_by", sa.String(length=100), nullable=True),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.Column(
            "started_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "finished_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "created_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evstep_run"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "phase", "seq", name="uq_evstep_slot"),
    )
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.create_index("idx_evstep_due", ["status", "due_at"], unique=False)
        batch_op.create_index("idx_evstep_lease", ["status", "claim_expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.drop_index("idx_evstep_lease")
        batch_op.drop_index("idx_evstep_due")

    op.drop_table("event_run_steps")
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.drop_index("idx_evrun_lease")
        batch_op.drop_index("idx_evrun_wake")
        batch_op.drop_index("idx_evrun_due")
        batch_op.drop_index("idx_evrun_concurrency")

    op.drop_table("event_runs")
    op.drop_table("event_versions")
    with op.batch_alter_table("event_run_log", schema=None) as batch_op:
        batch_op.drop_index("idx_evlog_run")

    op.drop_table("event_run_log")
    op.drop_table("event_definitions")
