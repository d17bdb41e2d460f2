"""Read-only projections for front ends: a run's status, lists of runs and events, a step's context.

Front ends render these; they never query the tables themselves. The package is cut by what is
read, and this module is its public face (front ends name ``runner.views``, not the parts):

- ``runs``: a run's status view (``RunView``, its phases and steps), the list of runs, its reminders;
- ``definitions``: the published events' listing, the schedule people read (``upcoming``), and
  the current definition a start preflights;
- ``step_context``: ``step_describer``, where a step sits, for the text of its messages;
- ``log``: a run's history and the run-log feed (``log_for_run``, ``latest_log_id``, ``log_after``);
- ``live``: what a run's live message in the staff channel shows, and where it is (``live_message_of``);
- ``health``: the database, the serving processes and the runs that are not well (``health``).
"""

from runner.views.definitions import (
    DefinitionSummary,
    UpcomingEvent,
    current_definition,
    list_definitions,
    published_definitions,
    upcoming,
)
from runner.views.health import HealthReport, health
from runner.views.live import (
    HumanAction,
    LiveMessages,
    LiveRow,
    LiveView,
    PostedLink,
    Waiting,
    WaitKind,
    live_message_of,
    live_view,
)
from runner.views.log import latest_log_id, log_after, log_for_run
from runner.views.runs import (
    PhaseView,
    PrunedRun,
    ReminderView,
    RunSummary,
    RunView,
    StepView,
    list_runs,
    reminders_of_run,
    run_view,
    step_name,
)
from runner.views.step_context import StepContext, step_describer

__all__ = [
    "DefinitionSummary",
    "HealthReport",
    "HumanAction",
    "LiveMessages",
    "LiveRow",
    "LiveView",
    "PhaseView",
    "PostedLink",
    "PrunedRun",
    "ReminderView",
    "RunSummary",
    "RunView",
    "StepContext",
    "StepView",
    "UpcomingEvent",
    "WaitKind",
    "Waiting",
    "current_definition",
    "health",
    "latest_log_id",
    "list_definitions",
    "list_runs",
    "live_message_of",
    "live_view",
    "log_after",
    "log_for_run",
    "published_definitions",
    "reminders_of_run",
    "run_view",
    "step_describer",
    "step_name",
    "upcoming",
]
