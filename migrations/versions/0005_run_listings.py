"""``event_run_listings``: the Discord scheduled event mirrored for each occurrence.

One row per mirrored run, inserted before the create request (its primary key is the run id, so
two processes can never both create an event for one run), holding the Discord event's id, a
hash and status of the last state pushed, and a lease for the push in progress.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_run_listings",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("external_id", sa.String(length=32), nullable=True),
        sa.Column("pushed", sa.String(length=64), nullable=True),
        sa.Column("pushed_status", sa.String(length=16), nullable=True),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("claim_expires_at", _when(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evlist_run"),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index("idx_evlist_status", "event_run_listings", ["pushed_status"])
    op.create_index("idx_evlist_retry", "event_run_listings", ["claim_expires_at"])


def downgrade() -> None:
    op.drop_index("idx_evlist_retry", table_name="event_run_listings")
    op.drop_index("idx_evlist_status", table_name="event_run_listings")
    op.drop_table("event_run_listings")
