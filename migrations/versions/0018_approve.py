"""Approvals: who approved a step whose action's risk needs a staff approval before it runs
(``approved_by_id``, ``approved_by_name``, ``approved_at`` on ``event_run_steps``; NULL: not
approved, which every existing step is and none of them needs).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    # Plain ADD COLUMNs, not a batch: on SQLite a batch copies the table, which the foreign keys
    # of rows pointing at steps refuse once runs exist.
    op.add_column("event_run_steps", sa.Column("approved_by_id", sa.String(length=64), nullable=True))
    op.add_column("event_run_steps", sa.Column("approved_by_name", sa.String(length=100), nullable=True))
    op.add_column("event_run_steps", sa.Column("approved_at", _when(), nullable=True))


def downgrade() -> None:
    op.drop_column("event_run_steps", "approved_at")
    op.drop_column("event_run_steps", "approved_by_name")
    op.drop_column("event_run_steps", "approved_by_id")
