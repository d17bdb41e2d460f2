"""Read-only projections for front ends: a run's status, lists of runs and events, a step's context.

Front ends render these; they never query the tables themselves. The package is cut by what is
read, and this module is its public face (front ends name ``runner.views``, not the parts):

- ``runs``: a run's status view (``RunView``, its phases and steps), the list of runs, its reminders;
- ``definitions``: the published events' listing, the schedule people read (``upcoming``), and
  the current definition a start preflights;
- ``step_context``: ``step_describer``, where a step sits, for the text of its messages;
- ``log``: a run's history and the run-log feed (``log_for_run``, ``follow_log_from_now``, ``log_followed``);
- ``health``: the database, the serving processes and the runs that are not well (``health``);
- ``players``: what a player sees coming (``coming``) and their own sign-ups (``mine``).
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
from runner.views.log import follow_log_from_now, log_followed, log_for_run
from runner.views.players import Coming, coming, mine
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
    "Coming",
    "DefinitionSummary",
    "HealthReport",
    "PhaseView",
    "PrunedRun",
    "ReminderView",
    "RunSummary",
    "RunView",
    "StepContext",
    "StepView",
    "UpcomingEvent",
    "coming",
    "current_definition",
    "follow_log_from_now",
    "health",
    "list_definitions",
    "list_runs",
    "log_followed",
    "log_for_run",
    "mine",
    "published_definitions",
    "reminders_of_run",
    "run_view",
    "step_describer",
    "step_name",
    "upcoming",
]
