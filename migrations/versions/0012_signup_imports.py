"""Sign-ups imported from the Discord scheduled event's Interested list: ``event_signup_imports``
(each member imported into a run once, and what became of them).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_signup_imports",
        sa.Column("run_id", _big_id(), nullable=False),
        sa.Column("member_id", sa.String(length=32), nullable=False),
        sa.Column(
            "outcome",
            sa.Enum("joined", "not_allowed_role", name="signup_import", create_constraint=True),
            nullable=False,
        ),
        sa.Column("imported_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["event_runs.id"], name="fk_evsignimp_run"),
        sa.PrimaryKeyConstraint("run_id", "member_id"),
    )


def downgrade() -> None:
    op.drop_table("event_signup_imports")
