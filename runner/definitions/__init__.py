"""Event definitions: the pydantic models staff author in YAML, and their validation.

Validation is total and located: every problem is reported at once, each naming the file, the
phase key, the step index and the field, so an author can fix a definition in one pass. Params
are checked against the params model the named action declares, so a definition that publishes
is one every step of which its action will accept.
"""

from runner.definitions.durations import duration_seconds, shown_duration
from runner.definitions.keys import KEY
from runner.definitions.loading import from_spec, load_file, parse_yaml, read_file
from runner.definitions.model import (
    ATTENDEE_REMINDER_ACTION,
    CONCURRENCY_KEY_MAX,
    DEFAULT_GRACE_SECONDS,
    DUPLICATE_PHASES,
    MAX_GRACE_SECONDS,
    MAX_PARAM_NODES,
    REHEARSAL_KEY_PREFIX,
    REMINDER_ACTION,
    REMINDERS_PHASE,
    CronSchedule,
    DiscordEventDefinition,
    EventDefinition,
    ManualSchedule,
    OnceSchedule,
    PhaseDefinition,
    ReminderDefinition,
    Schedule,
    StepDefinition,
    reminder_action,
)
from runner.definitions.signup import SignupDefinition
from runner.definitions.validation import publication_problems, validate

__all__ = [
    "ATTENDEE_REMINDER_ACTION",
    "CONCURRENCY_KEY_MAX",
    "DEFAULT_GRACE_SECONDS",
    "DUPLICATE_PHASES",
    "KEY",
    "MAX_GRACE_SECONDS",
    "MAX_PARAM_NODES",
    "REHEARSAL_KEY_PREFIX",
    "REMINDERS_PHASE",
    "REMINDER_ACTION",
    "CronSchedule",
    "DiscordEventDefinition",
    "EventDefinition",
    "ManualSchedule",
    "OnceSchedule",
    "PhaseDefinition",
    "ReminderDefinition",
    "Schedule",
    "SignupDefinition",
    "StepDefinition",
    "duration_seconds",
    "from_spec",
    "load_file",
    "parse_yaml",
    "publication_problems",
    "read_file",
    "reminder_action",
    "shown_duration",
    "validate",
]
