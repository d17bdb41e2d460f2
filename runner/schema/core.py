"""The engine's tables (definitions, versions, runs, steps, the run log, processes) and those of
the Discord-shaped services that every run has (listings, live messages, claims, leases).

The statements that read and write these tables live next to them in
``runner/sql/`` (one module per table group), or, for the tables only the Discord-shaped services
use (listings, live messages, external claims and work leases), in ``bridge/sql/``. Those tables
are still the store's: one schema, one migration history, and retention deletes their rows with
their runs.

Conventions that the statements rely on:

* Every datetime is **naive UTC** and comes from Python's clock (``runner.clock``), never from
  the server's ``NOW()``: the tests drive time, and two servers' clocks never agree.
* On MariaDB a plain ``DATETIME`` truncates to the second, which would make "due at 12:00:00.4"
  and "now is 12:00:00.9" compare equal. ``DATETIME(6)`` keeps the microseconds.
* ``scope`` is ``NOT NULL DEFAULT ''`` because MariaDB lets any number of NULLs through a unique
  index: a NULL scope would let two runs of one occurrence exist.
"""

from __future__ import annotations

import datetime as dt
import enum

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from runner.states import (
    LISTING_FINAL,
    CleanupStatus,
    Health,
    OnFailure,
    RunStatus,
    StepStatus,
)

metadata = sa.MetaData()


def utc_datetime() -> sa.types.TypeEngine[dt.datetime]:
    """Naive-UTC datetime with microseconds on every backend."""
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def big_id() -> sa.types.TypeEngine[int]:
    # SQLite only auto-increments an ``INTEGER PRIMARY KEY``; MariaDB gets a BIGINT.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def db_enum(name: str, values: type[enum.StrEnum]) -> sa.Enum:
    # Native ENUM on MariaDB ("is `missed` a legal value" is part of the contract); a VARCHAR
    # with a CHECK on SQLite so a typo in a status is refused there too. Built from the stored
    # strings, in declaration order, so rows read back as plain strings equal to the enums.
    return sa.Enum(*(member.value for member in values), name=name, native_enum=True, create_constraint=True)


definitions = sa.Table(
    "event_definitions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(64), nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("grace_seconds", sa.Integer, nullable=False, server_default=sa.text("900")),
    sa.Column("current_version_id", sa.Integer, nullable=True),
    # Occurrences of a once/cron schedule are materialised ahead of time up to this instant, so
    # a tick only works out the ones after it instead of re-inserting every one every tick.
    sa.Column("materialised_until", utc_datetime(), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    sa.UniqueConstraint("key", name="uq_evdef_key"),
)

versions = sa.Table(
    "event_versions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "definition_id",
        sa.Integer,
        sa.ForeignKey("event_definitions.id", name="fk_evver_definition"),
        nullable=False,
    ),
    sa.Column("version", sa.Integer, nullable=False),
    # sha256 of the canonical JSON of the validated definition: publishing identical content
    # again compares equal and is a no-op.
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("source", sa.String(500), nullable=True),
    sa.Column("published_by", sa.String(100), nullable=True),
    sa.Column("published_at", utc_datetime(), nullable=False),
    sa.UniqueConstraint("definition_id", "version", name="uq_evver_number"),
)

runs = sa.Table(
    "event_runs",
    metadata,
    sa.Column("id", big_id(), primary_key=True, autoincrement=True),
    sa.Column(
        "definition_id",
        sa.Integer,
        sa.ForeignKey("event_definitions.id", name="fk_evrun_definition"),
        nullable=False,
    ),
    sa.Column(
        "version_id", sa.Integer, sa.ForeignKey("event_versions.id", name="fk_evrun_version"), nullable=False
    ),
    sa.Column("scope", sa.String(190), nullable=False, server_default=""),
    sa.Column(
        "status", db_enum("run_status", RunStatus), nullable=False, server_default=RunStatus.SCHEDULED.value
    ),
    sa.Column("health", db_enum("run_health", Health), nullable=False, server_default=Health.OK.value),
    sa.Column("current_phase", sa.String(64), nullable=True),
    sa.Column("scheduled_for", utc_datetime(), nullable=False),
    # The moment of the schedule this run is the occurrence of, and the column the occurrence key
    # holds; NULL for a manual start, which is no occurrence (any number of NULLs pass a unique
    # index on both backends), so starts never collide and scheduled occurrences still do.
    sa.Column("occurrence_at", utc_datetime(), nullable=True),
    sa.Column("concurrency_key", sa.String(190), nullable=True),
    sa.Column("rehearsal", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("started_by", sa.String(100), nullable=True),
    sa.Column("started_at", utc_datetime(), nullable=True),
    sa.Column("ended_at", utc_datetime(), nullable=True),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claim_expires_at", utc_datetime(), nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    # When the tick should next look at this run; NULL when nothing the tick can do will move it
    # (parked on a cue, paused, ended). The tick's due query reads only this index, which keeps
    # a tick over ten thousand dormant runs as cheap as one over ten.
    sa.Column("wake_at", utc_datetime(), nullable=True),
    # A wait at the very end of a phase holds the first step of the next phase, which does not
    # exist yet; the hold waits here until that phase is materialised.
    sa.Column("held_until", utc_datetime(), nullable=True),
    # The run holding our concurrency key when we last looked: `run.blocked` is logged when this
    # changes, not on every tick.
    sa.Column("blocked_by", big_id(), nullable=True),
    # The concurrency key while this run holds it, NULL otherwise. Its unique index, not the
    # check before the claim, is what stops two runners starting two holders of one key at once.
    sa.Column("concurrency_slot", sa.String(190), nullable=True),
    # Bumped by every control that should wake the run. A tick that read one value releases the
    # run with the wake time it worked out only if nobody nudged it meanwhile; otherwise a GM's
    # confirm landing mid-tick would be overwritten by "parked, nothing to do".
    sa.Column("nudges", sa.Integer, nullable=False, server_default=sa.text("0")),
    # Whether a cancel left things to undo (``runner.engine.cleanup``): not_required until a cancel with
    # cleanup finds entries in the run's ledger.
    sa.Column(
        "cleanup_status",
        db_enum("run_cleanup_status", CleanupStatus),
        nullable=False,
        server_default=CleanupStatus.NOT_REQUIRED.value,
    ),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    sa.UniqueConstraint("definition_id", "scope", "occurrence_at", name="uq_evrun_occurrence"),
    sa.UniqueConstraint("concurrency_slot", name="uq_evrun_concurrency_slot"),
    sa.Index("idx_evrun_due", "status", "scheduled_for"),
    sa.Index("idx_evrun_concurrency", "concurrency_key", "status"),
    sa.Index("idx_evrun_wake", "wake_at"),
    # Dropping dead holders' leases must not scan every run in the table.
    sa.Index("idx_evrun_lease", "claim_expires_at"),
    # A holder that ends wakes the runs blocked on it; without this that is a scan of every run.
    sa.Index("idx_evrun_blocked", "blocked_by"),
    # Retention finds the runs that ended before its cut-off without reading every run.
    sa.Index("idx_evrun_ended", "ended_at"),
)

steps = sa.Table(
    "event_run_steps",
    metadata,
    sa.Column("id", big_id(), primary_key=True, autoincrement=True),
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evstep_run"), nullable=False),
    sa.Column("phase", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("label", sa.String(200), nullable=True),
    sa.Column("action_id", sa.String(96), nullable=False),
    sa.Column("params", sa.JSON, nullable=True),
    sa.Column("action_version", sa.Integer, nullable=False, server_default=sa.text("1")),
    sa.Column(
        "status", db_enum("step_status", StepStatus), nullable=False, server_default=StepStatus.PENDING.value
    ),
    sa.Column("due_at", utc_datetime(), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column(
        "on_failure",
        db_enum("step_on_failure", OnFailure),
        nullable=False,
        server_default=OnFailure.PAUSE.value,
    ),
    sa.Column("idempotency_key", sa.String(40), nullable=False),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claim_expires_at", utc_datetime(), nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    # What the action reported back (e.g. where a cue was posted, so it can be edited later).
    sa.Column("result", sa.JSON, nullable=True),
    # Who settled a step by hand (confirm / skip): an id a front end can mention (NULL for the
    # command line or a rehearsal) and a display name; and the note they left.
    sa.Column("settled_by_id", sa.String(64), nullable=True),
    sa.Column("settled_by_name", sa.String(100), nullable=True),
    sa.Column("note", sa.String(500), nullable=True),
    # Who approved a step whose action's risk waits for staff (``runner.approvals``); NULL: not
    # approved, so such a step posts its approval request instead of running.
    sa.Column("approved_by_id", sa.String(64), nullable=True),
    sa.Column("approved_by_name", sa.String(100), nullable=True),
    sa.Column("approved_at", utc_datetime(), nullable=True),
    sa.Column("started_at", utc_datetime(), nullable=True),
    sa.Column("finished_at", utc_datetime(), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    sa.UniqueConstraint("run_id", "phase", "seq", name="uq_evstep_slot"),
    sa.Index("idx_evstep_due", "status", "due_at"),
    # The reclaim scans expired leases; parked steps (NULL lease) must not cost it anything.
    sa.Index("idx_evstep_lease", "status", "claim_expires_at"),
)

run_log = sa.Table(
    "event_run_log",
    metadata,
    sa.Column("id", big_id(), primary_key=True, autoincrement=True),
    sa.Column("run_id", big_id(), nullable=False),
    sa.Column("step_id", big_id(), nullable=True),
    sa.Column("kind", sa.String(48), nullable=False),
    # Who did it by hand (``history.Actor``); NULL for the tick.
    sa.Column("actor_id", sa.String(64), nullable=True),
    sa.Column("actor_name", sa.String(100), nullable=True),
    sa.Column("detail", sa.JSON, nullable=True),
    sa.Column("at", utc_datetime(), nullable=False),
    sa.Index("idx_evlog_run", "run_id", "id"),
)

listings = sa.Table(
    "event_run_listings",
    metadata,
    # One row per occurrence mirrored as a Discord scheduled event. The row is written before
    # the create request, so its primary key is what stops two processes creating two events.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evlist_run"), primary_key=True),
    # The Discord event's id, once Discord has answered the create.
    sa.Column("external_id", sa.String(32), nullable=True),
    # sha256 of the last state Discord accepted, and its status (scheduled, active, completed,
    # cancelled; gone: deleted in Discord; skipped: never worth listing). A state equal to the
    # pushed one is never sent again; a final status is never looked at again.
    sa.Column("pushed", sa.String(64), nullable=True),
    sa.Column("pushed_status", sa.String(16), nullable=True),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claim_expires_at", utc_datetime(), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    # The start-up reconcile and the "how many are listed" count read open listings only.
    sa.Index("idx_evlist_status", "pushed_status"),
    # Failed pushes are retried when their back-off lease runs out.
    sa.Index("idx_evlist_retry", "claim_expires_at"),
)

# ``states.LISTING_FINAL`` in a fixed order, for the statements that filter ``pushed_status``.
LISTING_FINAL_STATUSES = tuple(sorted(LISTING_FINAL))

live_messages = sa.Table(
    "event_run_live_messages",
    metadata,
    # One row per run followed by a live message in the staff channel. The row is written
    # (claimed) before the message is posted, so its primary key is what stops two processes
    # posting two live messages for one run.
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evlive_run"), primary_key=True),
    sa.Column("channel_id", sa.String(32), nullable=False),
    # The Discord message, once Discord has answered the post; NULL again when it was deleted.
    sa.Column("message_id", sa.String(32), nullable=True),
    # Messages posted for this run so far: the next post's nonce is built from it, so a post
    # repeated after a crash carries the same nonce (Discord returns the first message) while a
    # post replacing a deleted message carries a new one.
    sa.Column("posts", sa.Integer, nullable=False, server_default=sa.text("0")),
    # sha256 of the last render Discord accepted: a render equal to it is never sent again.
    sa.Column("digest", sa.String(64), nullable=True),
    # Set with the edit that shows how the run ended; the message is never looked at again.
    sa.Column("closed", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claim_expires_at", utc_datetime(), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Column("updated_at", utc_datetime(), nullable=False),
    # The start-up reconcile reads the open messages only.
    sa.Index("idx_evlive_closed", "closed"),
)

processes = sa.Table(
    "runner_processes",
    metadata,
    # One row per serving process (a bot), written by its loop at most once per tick interval and
    # deleted when it closes cleanly; the key is the runner's owner string, the one its leases
    # carry, so what a process holds is read from the leases themselves. A row whose last_seen
    # stops moving is a process that died or hangs.
    sa.Column("owner", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(64), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", utc_datetime(), nullable=False),
    sa.Column("last_seen", utc_datetime(), nullable=False),
    # Its own tick interval: each row is judged alive by its own rhythm.
    sa.Column("interval_ms", sa.Integer, nullable=False),
    # The last tick, the most any tick since the previous heartbeat started after it was due,
    # and the longest of those ticks (whole milliseconds: one type on both backends).
    sa.Column("last_tick_at", utc_datetime(), nullable=True),
    sa.Column("tick_lag_ms", sa.Integer, nullable=True),
    sa.Column("tick_ms", sa.Integer, nullable=True),
)

run_summaries = sa.Table(
    "event_run_summaries",
    metadata,
    # One row per ended run whose run log and steps retention prunes, written before the first
    # row is deleted: what people still want to know of an old run once its history is gone.
    # The run's own row stays (its status, scheduled, start and end times, last error).
    sa.Column("run_id", big_id(), sa.ForeignKey("event_runs.id", name="fk_evsum_run"), primary_key=True),
    # A copy of the run's ``ended_at``: the newest one summarised is where the next pass
    # resumes, read from this index rather than found again among every ended run.
    sa.Column("ended_at", utc_datetime(), nullable=False),
    # Who started it (``run.created``'s actor) and who ended it and why (its last
    # ``run.status`` line), as ``history.Actor`` keeps them: an id a front end can mention.
    sa.Column("started_by_id", sa.String(64), nullable=True),
    sa.Column("started_by_name", sa.String(100), nullable=True),
    sa.Column("ended_by_id", sa.String(64), nullable=True),
    sa.Column("ended_by_name", sa.String(100), nullable=True),
    sa.Column("ended_why", sa.String(500), nullable=True),
    # How many of its steps ended in each status (an object of ``StepStatus`` value to count),
    # its reminders apart, and how many run-log lines it had.
    sa.Column("steps", sa.JSON, nullable=True),
    sa.Column("reminders", sa.JSON, nullable=True),
    sa.Column("log_lines", sa.Integer, nullable=False, server_default=sa.text("0")),
    # NULL while its rows are being deleted (a few hundred a pass); set once they are gone.
    sa.Column("pruned_at", utc_datetime(), nullable=True),
    sa.Column("created_at", utc_datetime(), nullable=False),
    sa.Index("idx_evsum_ended", "ended_at"),
    sa.Index("idx_evsum_pruning", "pruned_at", "run_id"),
)

external_claims = sa.Table(
    "event_external_claims",
    metadata,
    # One row per external event (an id given by the front end, such as a Discord interaction's
    # snowflake) that a process took on. Inserted before anything acts: its primary key is what
    # lets exactly one of several processes that all received the event handle it.
    sa.Column("external_id", sa.String(64), primary_key=True),
    sa.Column("claimed_by", sa.String(64), nullable=False),
    sa.Column("claimed_at", utc_datetime(), nullable=False),
    # Old claims are pruned by age.
    sa.Index("idx_evclaim_at", "claimed_at"),
)

work_leases = sa.Table(
    "event_work_leases",
    metadata,
    # One row per piece of work only one process may do at a time (posting the staff log, the
    # live messages, the Events-tab mirror): who holds it and until when. Another process takes
    # it over once ``lease_until`` is past.
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=True),
    sa.Column("lease_until", utc_datetime(), nullable=False),
    # Where the holder got to (a run-log id, for the staff log) and the items past it it has
    # already dealt with, so whoever takes over starts exactly there.
    sa.Column("position", big_id(), nullable=True),
    sa.Column("done", sa.JSON, nullable=True),
    sa.Column("updated_at", utc_datetime(), nullable=False),
)
