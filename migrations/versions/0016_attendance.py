"""Attendance: ``event_attendance``, one row per (run, member) saying whether a seated member
came (attended / no_show, marked by a GM at a cue or by staff afterwards) or left late
(late_cancel, recorded by the leave itself).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ATTENDANCE = ("attended", "no_show", "late_cancel")


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_attendance",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column("member_name", sa.String(length=100), nullable=False),
        sa.Column(
            "status", sa.Enum(*ATTENDANCE, name="attendance_status", create_constraint=True), nullable=False
        ),
        sa.Column("marked_by", sa.String(length=100), nullable=True),
        sa.Column("marked_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evatt_run"),
        sa.PrimaryKeyConstraint("run_id", "member_id"),
    )
    op.create_index("idx_evatt_member", "event_attendance", ["member_id", "status"])


def downgrade() -> None:
    op.drop_index("idx_evatt_member", table_name="event_attendance")
    op.drop_table("event_attendance")
