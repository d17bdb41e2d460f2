"""When a definition's occurrences fall, and how a schedule is described to people.

Cron expressions are evaluated in the definition's IANA time zone by ``cronsim`` (a maintained
library), so "every Friday at 20:00 Europe/Berlin" stays at 20:00 local across DST changes; the
instants handed back are naive UTC like everything else the runner stores.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from cronsim import CronSim

from runner.clock import to_naive_utc
from runner.definitions import CronSchedule, EventDefinition, OnceSchedule, Schedule, cron_dates

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
        # Only yielded moments count towards the cap: the engine reads "as many as the cap" as
        # "stopped early, carry on from the last one next pass".
        count = 0
        for moment in _cron_moments(schedule, after):
            if moment > until or count >= MAX_OCCURRENCES_PER_PASS:
                return
            count += 1
            yield moment


def moved_to(schedule: Schedule) -> dict[dt.datetime, dt.datetime]:
    """Each moved occurrence's new start -> the start it had, both naive UTC."""
    if not isinstance(schedule, CronSchedule):
        return {}
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    moved = {}
    for day, target in schedule.moves.items():
        for local in cron_dates.firings_on(schedule.cron, schedule.timezone, day):
            moved[to_naive_utc(target.replace(tzinfo=zone))] = to_naive_utc(local)
    return moved


def _cron_moments(schedule: CronSchedule, after: dt.datetime) -> Iterator[dt.datetime]:
    """The cron's firings strictly after ``after`` without its skipped and moved dates, with the
    moved ones' new starts in their place, in order."""
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    left_out = set(schedule.skip) | set(schedule.moves)
    targets = sorted(at for at in moved_to(schedule) if at > after)
    try:
        for local in CronSim(schedule.cron, after.replace(tzinfo=dt.UTC).astimezone(zone)):
            moment = to_naive_utc(local)
            if moment <= after or local.date() in left_out:
                continue
            while targets and targets[0] <= moment:
                yield targets.pop(0)
            yield moment
    except OverflowError:
        # A cron whose next firing lies past the year 9999 simply has no more occurrences.
        pass
    yield from targets


def start_of(definition: EventDefinition, occurrence: dt.datetime) -> dt.datetime | None:
    """When this version starts the occurrence whose scheduled moment is ``occurrence`` (naive
    UTC, the run's occurrence key): that moment, a moved date's new start, or ``None`` when the
    version has no such occurrence (another schedule, or the date is skipped)."""
    schedule = definition.schedule
    if not isinstance(schedule, CronSchedule):
        found = occurrences(definition, occurrence - dt.timedelta(microseconds=1), occurrence)
        return occurrence if occurrence in set(found) else None
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    day = occurrence.replace(tzinfo=dt.UTC).astimezone(zone).date()
    firings = {to_naive_utc(f) for f in cron_dates.firings_on(schedule.cron, schedule.timezone, day)}
    if occurrence not in firings or day in schedule.skip:
        return None
    if day in schedule.moves:
        return to_naive_utc(schedule.moves[day].replace(tzinfo=zone))
    return occurrence


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
    found: list[dt.datetime] = []
    for moment in _cron_moments(schedule, after):
        found.append(moment)
        if len(found) == count:
            break
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
    # A moved date's start as the schedule had it; ``skipped``: a date that has no occurrence,
    # listed where it would have been so staff see the exception.
    moved_from: dt.datetime | None = None
    skipped: bool = False


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
    origins = moved_to(definition.schedule)
    answer = []
    for scope, found in by_scope.items():
        taken = {item.at for item in found}
        if scope in scopes:
            found = found + [Upcoming(at) for at in computed if at not in taken]
        found.sort(key=lambda item: item.at)
        found = [replace(item, moved_from=origins.get(item.at)) for item in found[:count]]
        answer.append(ScopeUpcoming(scope, _with_skipped(definition.schedule, found, now)))
    return answer


def _with_skipped(schedule: Schedule, found: list[Upcoming], now: dt.datetime) -> list[Upcoming]:
    """``found`` with the skipped dates between now and its last occurrence."""
    if not isinstance(schedule, CronSchedule) or not schedule.skip or not found:
        return found
    last = found[-1].at
    skipped = [
        Upcoming(moment, skipped=True)
        for day in schedule.skip
        for local in cron_dates.firings_on(schedule.cron, schedule.timezone, day)
        if now < (moment := to_naive_utc(local)) <= last
    ]
    return sorted(found + skipped, key=lambda item: item.at)
