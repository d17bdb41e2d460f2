"""Sign-ups: ``event_signups`` (one row per run and member), ``event_signup_pools`` (each option's
and the run's seats, counted under a CHECK), ``event_signup_notices`` (the promotion outbox) and
``event_signup_messages`` (the sign-up message of each run).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_signups",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("member_name", sa.String(length=100), nullable=False),
        sa.Column("option", sa.String(length=64), nullable=False),
        sa.Column(
            "status",
            sa.Enum("confirmed", "waitlisted", "cancelled", name="signup_status", create_constraint=True),
            nullable=False,
        ),
        sa.Column("position", _big_id(), nullable=False),
        sa.Column("joined_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evsign_run"),
        sa.PrimaryKeyConstraint("run_id", "member_id"),
    )
    op.create_index("idx_evsign_order", "event_signups", ["run_id", "status", "position"])
    op.create_table(
        "event_signup_pools",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=True),
        sa.Column("taken", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("clicks", _big_id(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("taken >= 0 AND (capacity IS NULL OR taken <= capacity)", name="ck_evpool_taken"),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evpool_run"),
        sa.PrimaryKeyConstraint("run_id", "pool"),
    )
    op.create_table(
        "event_signup_notices",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("seq", _big_id(), nullable=False),
        sa.Column("option", sa.String(length=64), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("lease_until", _when(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("delivered_at", _when(), nullable=True),
        sa.Column("delivered_via", sa.String(length=16), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evnotice_run"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "member_id", "kind", "seq", name="uq_evnotice_once"),
    )
    op.create_index("idx_evnotice_open", "event_signup_notices", ["delivered_at", "lease_until"])
    op.create_table(
        "event_signup_messages",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("message_id", sa.String(length=32), nullable=True),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("shown_at", _when(), nullable=True),
        sa.Column("closed", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("claim_expires_at", _when(), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evsignmsg_run"),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index("idx_evsignmsg_closed", "event_signup_messages", ["closed"])


def downgrade() -> None:
    op.drop_index("idx_evsignmsg_closed", table_name="event_signup_messages")
    op.drop_table("event_signup_messages")
    op.drop_index("idx_evnotice_open", table_name="event_signup_notices")
    op.drop_table("event_signup_notices")
    op.drop_table("event_signup_pools")
    op.drop_index("idx_evsign_order", table_name="event_signups")
    op.drop_table("event_signups")
