"""A time as staff type it in Discord, read in the config's (or the event's) time zone.

For now only ISO ``YYYY-MM-DD HH:MM``: branch ``create`` writes this module on ``dateparser``
("friday 20:00", "in 2h") behind the same ``parse_when``, which replaces this one when merged.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

from runner.errors import UserFacingError

WHEN_MAX = 100
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}", re.ASCII)
EXAMPLE = '"2026-12-12 20:00"'


class WhenError(UserFacingError):
    """That is not a time I can read."""


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 60 else flat[:59] + "…"


def parse_when(text: str, now: dt.datetime, zone: str) -> dt.datetime:
    """The instant ``text`` names, aware, in ``zone``; ``now`` is naive UTC (the bot's clock).

    ``WhenError`` says, quoting ``text``, why it names no time to come."""
    typed = " ".join(text.split())
    if not typed:
        raise WhenError(f"No time was given: write when it starts, e.g. {EXAMPLE}.")
    if len(typed) > WHEN_MAX:
        raise WhenError(f"“{_shown(typed)}” is too long to be a time (at most {WHEN_MAX} characters).")
    try:
        if not _ISO.fullmatch(typed):
            raise ValueError(typed)
        local = dt.datetime.fromisoformat(typed)
    except ValueError:
        raise WhenError(
            f"“{_shown(typed)}” is not a time I can read: write it as {EXAMPLE} ({zone})."
        ) from None
    tz = zoneinfo.ZoneInfo(zone)
    at = local.replace(tzinfo=tz)
    # A wall time the clocks skip does not survive the round trip through UTC.
    if at.astimezone(dt.UTC).astimezone(tz).replace(tzinfo=None) != local:
        raise WhenError(f"“{_shown(typed)}” does not exist in {zone} (the clocks go forward then).")
    if at.astimezone(dt.UTC).replace(tzinfo=None) <= now:
        raise WhenError(f"“{_shown(typed)}” ({zone}) has already passed.")
    return at
