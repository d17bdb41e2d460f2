"""Where "now" comes from.

The runner never asks the database for the time: every instant it writes or compares comes from
a clock object handed to it, so tests and the rehearsal drive time, and two servers whose clocks
disagree cannot disagree about a lease. All instants are naive UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Protocol


def utcnow() -> dt.datetime:
    """The current instant as naive UTC (the only form the schema stores)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def to_naive_utc(moment: dt.datetime) -> dt.datetime:
    """Convert an aware datetime to naive UTC; a naive one is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The current instant, naive UTC."""
        ...


class SystemClock:
    def now(self) -> dt.datetime:
        return utcnow()


class ManualClock:
    """A clock that only moves when told to: tests and the rehearsal's virtual time."""

    def __init__(self, start: dt.datetime) -> None:
        self._now = to_naive_utc(start)

    def now(self) -> dt.datetime:
        return self._now

    def set(self, moment: dt.datetime) -> None:
        self._now = to_naive_utc(moment)

    def advance(self, seconds: float) -> dt.datetime:
        self._now += dt.timedelta(seconds=seconds)
        return self._now
