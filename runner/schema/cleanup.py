"""The cleanup ledger: what each step of a run did that can be undone, recorded in the step's
settle, and run in reverse order, each entry once, by a cancel with cleanup
(``runner.engine.cleanup``). The run's ``cleanup_status`` is on ``event_runs``.
"""

from __future__ import annotations

import sqlalchemy as sa

from runner.schema.core import big_id, db_enum, metadata, utc_datetime
from runner.states import UndoStatus

run_undos = sa.Table(
    "event_run_undos",
    metadata,
    # Ascending in the order the steps succeeded: the cleanup runs the highest open id first.
    sa.Column("id", big_id(), primary_key=True, autoincrement=True),
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evundo_run"), nullable=False),
    # The step whose success this undoes (no foreign key: retention prunes steps, the ledger
    # entry keeps what it needs); one entry per step.
    sa.Column("step_id", big_id(), nullable=False),
    sa.Column("label", sa.String(200), nullable=True),
    # What undoes it (an action of the registry and its params); NULL for a manual entry.
    sa.Column("action_id", sa.String(96), nullable=True),
    sa.Column("params", sa.JSON, nullable=True),
    # The undo's own idempotency key (the step's with a suffix): a repeat after a crash between
    # the request and the settle carries the same key.
    sa.Column("idempotency_key", sa.String(48), nullable=False),
    sa.Column("status", db_enum("undo_status", UndoStatus), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claim_expires_at", utc_datetime(), nullable=True),
    # A transient failure waits until then before the next attempt.
    sa.Column("retry_at", utc_datetime(), nullable=True),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("finished_at", utc_datetime(), nullable=True),
    sa.UniqueConstraint("step_id", name="uq_evundo_step"),
    sa.Index("idx_evundo_run", "run_id", "status"),
)
