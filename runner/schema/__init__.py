"""The store's tables, as SQLAlchemy Core metadata: one ``metadata``, one migration history.

``core``: the engine's tables and those every run has (listings, live messages, claims,
leases); ``signups``: the sign-up tables, threads and attendee-role grants; ``cleanup``: the ledger
of what a run did that a cancel can undo; ``reminders``: the reminders sent by DM and who turned
them off. The statements that
read and write them live in ``runner/sql/`` (one module per table group), or, for the tables
only the Discord-shaped services use, in ``bridge/sql/``.

The conventions the statements rely on (naive UTC, microseconds, a scope never NULL) are
``core``'s.
"""

# The statuses' groups live in ``runner.states``; re-exported here for the readers that have
# always found them beside the tables.
from runner.schema.cleanup import run_undos
from runner.schema.core import (
    LISTING_FINAL_STATUSES,
    definitions,
    external_claims,
    listings,
    live_messages,
    metadata,
    processes,
    run_log,
    run_summaries,
    runs,
    steps,
    versions,
    work_leases,
)
from runner.schema.reminders import dm_settings, reminder_dms
from runner.schema.signups import (
    attendance,
    attendee_grants,
    run_threads,
    signup_imports,
    signup_messages,
    signup_notices,
    signup_pools,
    signups,
    thread_members,
)
from runner.states import (
    RUN_HOLDS_KEY,
    RUN_IN_FLIGHT,
    RUN_IN_PROGRESS,
    RUN_TERMINAL,
    RUN_TICKABLE,
    STEP_OPEN,
)

__all__ = [
    "LISTING_FINAL_STATUSES",
    "RUN_HOLDS_KEY",
    "RUN_IN_FLIGHT",
    "RUN_IN_PROGRESS",
    "RUN_TERMINAL",
    "RUN_TICKABLE",
    "STEP_OPEN",
    "attendance",
    "attendee_grants",
    "definitions",
    "dm_settings",
    "external_claims",
    "listings",
    "live_messages",
    "metadata",
    "processes",
    "reminder_dms",
    "run_log",
    "run_summaries",
    "run_threads",
    "run_undos",
    "runs",
    "signup_imports",
    "signup_messages",
    "signup_notices",
    "signup_pools",
    "signups",
    "steps",
    "thread_members",
    "versions",
    "work_leases",
]
