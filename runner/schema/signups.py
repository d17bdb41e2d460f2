"""The sign-up tables: seats and pools, the notice outbox, the sign-up message, the Interested
imports, the event threads and their members, and the attendee-role grants. On the same
``metadata`` as the rest of the schema (``runner.schema.core``), so one migration history
covers them and retention deletes their rows with their runs.
"""

from __future__ import annotations

import sqlalchemy as sa

from runner.schema.core import big_id, db_enum, metadata, utc_datetime
from runner.states import Attendance, SignupImport, SignupOverride, SignupStatus

# ── Sign-ups (``runner.signups``; migration 0010) ─────────────────────────

signups = sa.Table(
    "event_signups",
    metadata,
    # One row per (run, member): a member is signed up once, in one option.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evsign_run"), primary_key=True),
    sa.Column("member_id", sa.String(32), primary_key=True),
    # Their display name when they last clicked, for lists read without Discord (the CLI).
    sa.Column("member_name", sa.String(100), nullable=False),
    sa.Column("option", sa.String(64), nullable=False),
    sa.Column("status", db_enum("signup_status", SignupStatus), nullable=False),
    # The run's click number of their latest join (``event_signup_pools.clicks``): the order
    # the waiting list is served in.
    sa.Column("position", big_id(), nullable=False),
    sa.Column("joined_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    # The promotion reads the first waitlisted of a run; the list reads a run's rows in order.
    sa.Index("idx_evsign_order", "run_id", "status", "position"),
)

signup_pools = sa.Table(
    "event_signup_pools",
    metadata,
    # One row per option of a run's sign-up, and one named ``*`` for the whole run. ``taken`` is
    # moved only by an UPDATE guarded by ``taken < capacity``, and the CHECK refuses a count
    # past it: the database, not Python, decides who gets the last seat. Every join and leave
    # of a run first locks its ``*`` row (and takes the next click number from it), so joins,
    # leaves and promotions of one run happen one after the other, in click order.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evpool_run"), primary_key=True),
    sa.Column("pool", sa.String(64), primary_key=True),
    # NULL: no limit of its own.
    sa.Column("capacity", sa.Integer, nullable=True),
    sa.Column("taken", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("clicks", big_id(), nullable=False, server_default=sa.text("0")),
    # On the ``*`` row: staff closed or reopened the run's sign-ups (NULL: as the definition
    # says). Read under the same lock as every join, so a click never slips past a close.
    sa.Column("staff_override", db_enum("signup_override", SignupOverride), nullable=True),
    sa.CheckConstraint("taken >= 0 AND (capacity IS NULL OR taken <= capacity)", name="ck_evpool_taken"),
)

signup_notices = sa.Table(
    "event_signup_notices",
    metadata,
    # An outbox: a row is written in the transaction that promoted the member, so a promotion
    # that committed has exactly one notice and one that did not has none. A front end claims a
    # row (a lease) before it tells the member, and marks it delivered after.
    sa.Column("id", big_id(), primary_key=True, autoincrement=True),
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evnotice_run"), nullable=False),
    sa.Column("member_id", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    # The sign-up's position at the time (a member promoted twice, after joining again, is two).
    sa.Column("seq", big_id(), nullable=False),
    sa.Column("option", sa.String(64), nullable=False),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("lease_until", utc_datetime(), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("delivered_at", utc_datetime(), nullable=True),
    # How it reached the member: ``dm``, or ``mention`` when their DMs were closed.
    sa.Column("delivered_via", sa.String(16), nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.UniqueConstraint("run_id", "member_id", "kind", "seq", name="uq_evnotice_once"),
    # The delivery loop reads the undelivered ones.
    sa.Index("idx_evnotice_open", "delivered_at", "lease_until"),
)

signup_messages = sa.Table(
    "event_signup_messages",
    metadata,
    # One row per run whose sign-up message is posted: written (claimed) before the post, so
    # its primary key stops two processes posting two. Edits are coalesced: ``shown_at`` is
    # when the last edit went out, ``digest`` what it showed.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evsignmsg_run"), primary_key=True),
    sa.Column("channel_id", sa.String(32), nullable=False),
    sa.Column("message_id", sa.String(32), nullable=True),
    sa.Column("digest", sa.String(64), nullable=True),
    sa.Column("shown_at", utc_datetime(), nullable=True),
    sa.Column("closed", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claim_expires_at", utc_datetime(), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    sa.Index("idx_evsignmsg_closed", "closed"),
)


# ── Event threads and attendee roles (``bridge.threads``, ``bridge.attendee_roles``; 0011) ──

run_threads = sa.Table(
    "event_run_threads",
    metadata,
    # One row per thread a ``discord.thread`` step started on a run's announcement. A thread
    # started from a message has the message's id, so ``thread_id`` is known even when the
    # process that created it died before it could write this row.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evthread_run"), primary_key=True),
    sa.Column("thread_id", sa.String(32), primary_key=True),
    sa.Column("step_id", big_id(), nullable=False),
    sa.Column("channel_id", sa.String(32), nullable=False),
    sa.Column("created_at", utc_datetime(), nullable=False),
    # Set once the thread is archived after its run ended; the archive loop reads the NULLs.
    sa.Column("archived_at", utc_datetime(), nullable=True),
    sa.Index("idx_evthread_open", "archived_at"),
)

thread_members = sa.Table(
    "event_thread_members",
    metadata,
    # The attendees the bot has added to a run's thread, so each is added once; deleted once
    # Discord accepted taking the member out again (they gave up their seat).
    sa.Column("thread_id", sa.String(32), primary_key=True),
    sa.Column("member_id", sa.String(32), primary_key=True),
    sa.Column("added_at", utc_datetime(), nullable=False),
)

attendee_grants = sa.Table(
    "event_attendee_grants",
    metadata,
    # One row per (role, member) the bot has decided about for an ``attendee_role``, written
    # before it asks Discord and deleted once the member should no longer hold the role (after
    # Discord accepted the removal, when one is due): what the reconcile loop compares with who
    # should hold the role. Keyed by role, not run: a role shared by two runs is one grant, kept
    # while the member is confirmed in either.
    sa.Column("role_id", sa.String(32), primary_key=True),
    sa.Column("member_id", sa.String(32), primary_key=True),
    sa.Column("granted_at", utc_datetime(), nullable=False),
    # The member held the role before the bot would have given it (0013): it is theirs, and the
    # bot never takes it away.
    sa.Column("held_before", sa.Boolean, nullable=False, server_default=sa.false()),
    # Discord accepted the grant. A row written and not yet given is asked for again (the answer
    # may have been lost); the removal is asked for either way, a no-op at Discord if it never landed.
    sa.Column("given", sa.Boolean, nullable=False, server_default=sa.true()),
    # Why the bot stopped asking about this grant (``bridge.attendee_roles.Stop``): Discord's answer
    # was final (the member left, the role is gone, the bot may not manage it). Nothing is asked
    # again, nor taken back.
    sa.Column("stopped", sa.String(32), nullable=True),
)


# ── Sign-ups imported from the Discord event's Interested list (``runner.signups``; 0012) ──

signup_imports = sa.Table(
    "event_signup_imports",
    metadata,
    # One row per (run, member) taken from the Discord scheduled event's Interested list. The
    # import is one way: a member with a row here (or in ``event_signups``) is never imported
    # again, so one who left is not signed up again by the next poll, and one refused for their
    # roles is not asked about at every poll.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evsignimp_run"), primary_key=True),
    sa.Column("member_id", sa.String(32), primary_key=True),
    sa.Column("outcome", db_enum("signup_import", SignupImport), nullable=False),
    sa.Column("imported_at", utc_datetime(), nullable=False),
)

# ── Attendance (``runner.attendance``; migration 0016) ───────────────────

attendance = sa.Table(
    "event_attendance",
    metadata,
    # One row per (run, member): the last mark wins (a GM's at the cue, staff's afterwards).
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evatt_run"), primary_key=True),
    sa.Column("member_id", sa.String(32), primary_key=True),
    sa.Column("member_name", sa.String(100), nullable=False),
    sa.Column("status", db_enum("attendance_status", Attendance), nullable=False),
    # Who marked it (a display name, as the run log's actors are shown); the member themselves
    # for a late cancel.
    sa.Column("marked_by", sa.String(100), nullable=True),
    sa.Column("marked_at", utc_datetime(), nullable=False),
    # A member's record, and the no-show counts staff see beside a name.
    sa.Index("idx_evatt_member", "member_id", "status"),
)
