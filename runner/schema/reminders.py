"""The tables of reminders sent by direct message (``to: attendees``): one row per member and
reminder of a run (the outbox its loop sends from), and each member's choice to get them or not.
On the same ``metadata`` as the rest of the schema (``runner.schema.core``); migration 0017 (after attendance, 0016).
"""

from __future__ import annotations

import sqlalchemy as sa

from runner.schema.core import big_id, metadata, utc_datetime

reminder_dms = sa.Table(
    "event_reminder_dms",
    metadata,
    # Written when the reminder falls due, one row per seated member; the unique key makes a
    # second write of the same (run, reminder, member) nothing, so a reminder performed again
    # (retried after a crash, or by another process) never DMs anyone twice. A sender claims a
    # row (a lease) before it sends, and marks it sent after; a claim whose sender died is taken
    # over once the lease is over, and sent with the same nonce.
    sa.Column("id", big_id(), primary_key=True, autoincrement=True),
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evremdm_run"), nullable=False),
    # The reminder's place in the definition (its step's ``seq`` in the reminders phase).
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("step_id", big_id(), nullable=False),
    sa.Column("member_id", sa.String(32), nullable=False),
    # The reminder's text, placeholders filled in when it fell due.
    sa.Column("content", sa.String(2000), nullable=False),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("lease_until", utc_datetime(), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    # Set once: ``dm``; ``mention`` when their DMs were closed; ``dropped`` when it could not be
    # sent before the run started (a DM saying "starts in 10 minutes" never comes after).
    sa.Column("settled_at", utc_datetime(), nullable=True),
    sa.Column("settled_as", sa.String(16), nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.UniqueConstraint("run_id", "seq", "member_id", name="uq_evremdm_once"),
    # The loop reads the rows not yet settled.
    sa.Index("idx_evremdm_open", "settled_at", "lease_until"),
)

dm_settings = sa.Table(
    "member_dm_settings",
    metadata,
    # A member's own choice (``/reminders off``): no row means reminders by DM are on.
    sa.Column("member_id", sa.String(32), primary_key=True),
    sa.Column("reminders_off", sa.Boolean, nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
)
