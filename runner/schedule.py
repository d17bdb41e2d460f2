"""When a definition's occurrences fall, and how a schedule is described to people.

Cron expressions are evaluated in the definition's IANA time zone by ``cronsim`` (a maintained
library), so "every Friday at 20:00 Europe/Berlin" stays at 20:00 local across DST changes; the
instants handed back are naive UTC like everything else the runner stores.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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


def next_occurrences(definition: EventDefinition, after: dt.datetime, count: int) -> list[dt.datetime]:
    """The next ``count`` occurrences strictly after ``after`` (naive UTC), in order: a ``once``
    gives its instant or nothing, a manual event nothing. Unlike ``occurrences`` it needs no end
    of window, so a yearly cron is found as surely as a daily one."""
    schedule = definition.schedule
    if count <= 0:
        return []
    if isinstance(schedule, OnceSchedule):
        at = to_naive_utc(schedule.at)
        return [at] if at > after else []
    if not isinstance(schedule, CronSchedule):
        return []
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    found: list[dt.datetime] = []
    try:
        for local in CronSim(schedule.cron, after.replace(tzinfo=dt.UTC).astimezone(zone)):
            moment = to_naive_utc(local)
            if moment > after:
                found.append(moment)
                if len(found) == count:
                    break
    except OverflowError:
        # A cron whose next firing lies past the year 9999 simply has no more occurrences.
        pass
    return found


def zone_of(definition: EventDefinition) -> str:
    """The zone a person reads this event's times in: its cron's own, otherwise UTC (a ``once``
    is one instant, whatever offset it was written with)."""
    schedule = definition.schedule
    return schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"


def _clock(moment: dt.datetime) -> str:
    return moment.strftime("%H:%M:%S" if moment.second else "%H:%M")


def _day(moment: dt.datetime, *, year: bool = True) -> str:
    # Built by hand: strftime's "%-d" (no leading zero) is not portable.
    text = f"{moment:%a} {moment.day} {moment:%b}"
    return f"{text} {moment.year}" if year else text


def shown(moment: dt.datetime, zone: str = "UTC") -> str:
    """A naive-UTC instant as a person reads it, always with its zone: ``Fri 4 Dec 2026 20:00
    GMT (20:00 UTC)`` in the event's zone, or ``Fri 4 Dec 2026 20:00 UTC``. The UTC day is
    named too when it is not the local one."""
    utc = moment.replace(tzinfo=dt.UTC)
    local = utc.astimezone(zoneinfo.ZoneInfo(zone))
    name = local.tzname() or zone
    if name[:1] in "+-":
        # Zones without an abbreviation report a bare offset ("+03"), which names no place.
        name = zone
    if name == "UTC" and local.utcoffset() == dt.timedelta(0):
        return f"{_day(utc)} {_clock(utc)} UTC"
    utc_part = _clock(utc) if local.date() == utc.date() else f"{_day(utc, year=False)} {_clock(utc)}"
    return f"{_day(local)} {_clock(local)} {name} ({utc_part} UTC)"


@dataclass(frozen=True)
class Upcoming:
    """One occurrence still to come: ``run_id`` when its run is already created (staff can
    cancel it), ``None`` when the runner will create it nearer the time."""

    at: dt.datetime
    run_id: int | None = None


@dataclass(frozen=True)
class ScopeUpcoming:
    scope: str
    occurrences: list[Upcoming]


def upcoming_by_scope(
    definition: EventDefinition,
    created: Iterable[tuple[int, str, dt.datetime]],
    created_until: dt.datetime | None,
    now: dt.datetime,
    count: int,
) -> list[ScopeUpcoming]:
    """The next ``count`` occurrences of each scope: the runs already created and not started
    (``created``: run id, scope, start), then the computed ones beyond ``created_until`` (how far
    the runner has created occurrences). An occurrence before that point with no run waiting
    was started, cancelled or missed: it is not to come any more, so it is not computed again."""
    scopes = definition.run_scopes()
    by_scope: dict[str, list[Upcoming]] = {scope: [] for scope in scopes}
    for run_id, scope, at in sorted(created, key=lambda item: (item[2], item[0])):
        # A scope a newer version dropped keeps the runs already created for it, and gets no more.
        by_scope.setdefault(scope, []).append(Upcoming(at, run_id))
    after = max(now, created_until) if created_until is not None else now
    computed = next_occurrences(definition, after, count)
    answer = []
    for scope, found in by_scope.items():
        taken = {item.at for item in found}
        if scope in scopes:
            found = found + [Upcoming(at) for at in computed if at not in taken]
        found.sort(key=lambda item: item.at)
        answer.append(ScopeUpcoming(scope, found[:count]))
    return answer
