"""Attendee-role grants record whether the member held the role before and whether Discord's
answer was final: ``event_attendee_grants.held_before``, ``given`` and ``stopped``. The bot
takes a role back only from a member it gave it to; existing rows were all given by the bot.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("event_attendee_grants", schema=None) as batch_op:
        batch_op.add_column(sa.Column("held_before", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("given", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column("stopped", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("event_attendee_grants", schema=None) as batch_op:
        batch_op.drop_column("stopped")
        batch_op.drop_column("given")
        batch_op.drop_column("held_before")
