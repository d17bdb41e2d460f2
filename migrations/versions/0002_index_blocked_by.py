"""Index event_runs.blocked_by: a run that ends wakes the runs blocked on its concurrency key.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.create_index("idx_evrun_blocked", ["blocked_by"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.drop_index("idx_evrun_blocked")
