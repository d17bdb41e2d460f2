"""One date of a recurring event: the ``skip`` and ``moves`` a cron schedule may carry.

Written as staff write it (or as ``/event skip`` and ``/event move`` publish it)::

    schedule:
      cron: "0 20 * * FRI"
      timezone: Europe/Berlin
      skip: [2026-12-25]                   # no occurrence that day
      moves: {2027-01-01: 2027-01-02 18:00} # that day's occurrence starts then instead

Dates and times are the schedule's own zone's (a move's new time may carry an offset; it is kept
as the local time it names). The exception lives in the definition, not in a table of overrides,
so it is versioned, validated and diffable like the rest: publishing it cancels the run already
booked for a skipped date and reschedules the one booked for a moved date
(``runner.catalog``).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterable

from cronsim import CronSim

# Enough for a year of weekly exceptions; each one costs a cron walk when the schedule is read.
MAX_DATE_EXCEPTIONS = 100


def local_move(value: dt.datetime, zone: str) -> dt.datetime:
    """A move's new time as the naive local time of the schedule's zone."""
    if value.tzinfo is None:
        return value.replace(second=0, microsecond=0) if value.microsecond else value
    return value.astimezone(zoneinfo.ZoneInfo(zone)).replace(tzinfo=None)


def firings_on(cron: str, zone: str, day: dt.date) -> list[dt.datetime]:
    """The cron's firings on ``day`` in ``zone``, as aware local times."""
    tz = zoneinfo.ZoneInfo(zone)
    start = dt.datetime.combine(day, dt.time(), tz) - dt.timedelta(microseconds=1)
    found = []
    try:
        for local in CronSim(cron, start):
            if local.date() != day:
                break
            found.append(local)
    except OverflowError:
        pass
    return found


def problems(cron: str, zone: str, skip: Iterable[dt.date], moves: dict[dt.date, dt.datetime]) -> list[str]:
    """What is wrong with a schedule's exceptions, each naming its date (empty when none)."""
    skipped = list(skip)
    found: list[str] = []
    if len(skipped) + len(moves) > MAX_DATE_EXCEPTIONS:
        return [f"at most {MAX_DATE_EXCEPTIONS} skipped and moved dates together (drop the past ones)"]
    twice = sorted({d for d in skipped if skipped.count(d) > 1})
    if twice:
        found.append(f"skip lists {', '.join(map(str, twice))} twice")
    for day in sorted(set(skipped) & set(moves)):
        found.append(f"{day} is both skipped and moved; keep one")
    for day in sorted(set(skipped) | set(moves)):
        count = len(firings_on(cron, zone, day))
        if count == 0:
            found.append(f"the schedule has no occurrence on {day} ({day:%a}) to skip or move")
        elif day in moves and count > 1:
            found.append(f"the schedule has {count} occurrences on {day}; a move needs one (skip it instead)")
    targets = [moves[day] for day in sorted(moves)]
    for day, target in sorted(moves.items()):
        if targets.count(target) > 1:
            found.append(f"{day} is moved to {target:%Y-%m-%d %H:%M}, where another date is moved too")
        elif target.date() not in skipped and target.date() not in moves:
            clash = [f for f in firings_on(cron, zone, target.date()) if f.replace(tzinfo=None) == target]
            if clash:
                found.append(f"{day} is moved to {target:%Y-%m-%d %H:%M}, an occurrence it already has")
    return found
