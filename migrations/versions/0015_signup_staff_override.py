"""Staff close and reopen a run's sign-ups: ``event_signup_pools.staff_override`` on the run's
``*`` row (NULL: as the definition says; ``closed``; ``open`` until the run ends).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OVERRIDE = ("closed", "open")


def upgrade() -> None:
    # A plain ADD COLUMN (as 0014's): a batch would copy the table, which its foreign key makes
    # fragile on SQLite once rows exist. MariaDB's column is a native ENUM.
    op.add_column(
        "event_signup_pools",
        sa.Column(
            "staff_override",
            sa.Enum(*OVERRIDE, name="signup_override", create_constraint=False),
            nullable=True,
        ),
    )


def downgrade() -> None:
    op.drop_column("event_signup_pools", "staff_override")
