"""``event_run_live_messages``: the live message that follows each run in the staff channel.

One row per followed run, inserted (claimed) before the message is posted (its primary key is
the run id, so two processes can never both post one), holding the channel and message ids, how
many messages were posted (the next post's nonce), a digest of the last render sent, whether the
run's end has been shown, and a lease for the post in progress.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_run_live_messages",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("message_id", sa.String(length=32), nullable=True),
        sa.Column("posts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("closed", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("claim_expires_at", _when(), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evlive_run"),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index("idx_evlive_closed", "event_run_live_messages", ["closed"])


def downgrade() -> None:
    op.drop_index("idx_evlive_closed", table_name="event_run_live_messages")
    op.drop_table("event_run_live_messages")
