"""When a definition's occurrences fall, and how a schedule is described to people.

Cron expressions are evaluated in the definition's IANA time zone by ``cronsim`` (a maintained
library), so "every Friday at 20:00 Europe/Berlin" stays at 20:00 local across DST changes; the
instants handed back are naive UTC like everything else the runner stores.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterator

from cronsim import CronSim

from runner.clock import to_naive_utc
from runner.definitions import CronSchedule, EventDefinition, OnceSchedule, Schedule

# A tick never works out more than this many occurrences of one definition at once, so a cron
# of "every minute" after a week of downtime cannot flood the table.
MAX_OCCURRENCES_PER_PASS = 50


def occurrences(definition: EventDefinition, after: dt.datetime, until: dt.datetime) -> Iterator[dt.datetime]:
    """Occurrences in ``(after, until]``, naive UTC, in order."""
    schedule = definition.schedule
    if isinstance(schedule, OnceSchedule):
        at = to_naive_utc(schedule.at)
        if after < at <= until:
            yield at
        return
    if isinstance(schedule, CronSchedule):
        zone = zoneinfo.ZoneInfo(schedule.timezone)
        start = after.replace(tzinfo=dt.UTC).astimezone(zone)
        # Only yielded moments count towards the cap: the engine reads "as many as the cap" as
        # "stopped early, carry on from the last one next pass".
        count = 0
        for local in CronSim(schedule.cron, start):
            moment = to_naive_utc(local)
            if moment > until or count >= MAX_OCCURRENCES_PER_PASS:
                return
            if moment > after:
                count += 1
                yield moment


def describe(schedule: Schedule) -> str:
    """One line for lists (``validate``, ``definitions``, ``/event list``): ``manual``,
    ``once at <ISO instant>`` or ``cron '<expression>' in <zone>``."""
    if isinstance(schedule, CronSchedule):
        return f"cron {schedule.cron!r} in {schedule.timezone}"
    if isinstance(schedule, OnceSchedule):
        return f"once at {schedule.at.isoformat()}"
    return "manual"
