"""Drop ``refused`` from the step statuses: nothing ever wrote it.

The seeds list it in their DDL, but no seed test and no statement of theirs or ours writes it:
an action id nobody registered fails the step (``failed``), and a refused control changes nothing
at all. A value no code writes is one a reader has to wonder about.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEPT = ("pending", "running", "done", "failed", "skipped", "cancelled")
_OLD = ("pending", "running", "done", "failed", "skipped", "refused", "cancelled")


def _status(values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(*values, name="step_status", create_constraint=True)


def upgrade() -> None:
    # No row can hold it, but a database edited by hand must not fail the ALTER: such a step
    # was refused by something, and failed is what the runner calls that.
    op.execute("UPDATE event_run_steps SET status = 'failed' WHERE status = 'refused'")
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.alter_column(
            "status",
            existing_type=_status(_OLD),
            type_=_status(_KEPT),
            existing_nullable=False,
            existing_server_default="pending",
        )


def downgrade() -> None:
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.alter_column(
            "status",
            existing_type=_status(_KEPT),
            type_=_status(_OLD),
            existing_nullable=False,
            existing_server_default="pending",
        )
