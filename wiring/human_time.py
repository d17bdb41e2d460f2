"""A time as staff type it in Discord ("friday 20:00", "tomorrow 8pm", "in 2h", "2026-12-12
20:00"), read by ``dateparser`` (a maintained parser; writing one is how bots end up with
"next friday" meaning last Friday).

The choices:

* **Relative to the bot's clock**, never ``datetime.now()``: "in 2h" and "friday" are counted from
  the ``now`` the caller hands in (the tests run on simulated time), read as a wall time in the
  config's time zone.
* **The future is preferred**: "friday" on a Saturday is the coming Friday, "20:00" after 20:00
  is tomorrow's.
* **English words** (``languages=["en"]``): guessing the language of three words turns "mar"
  into Spanish; ISO dates read the same in any language.
* **Refused, naming what was typed**: text that is no time, a time already past, and a wall
  time that does not exist in the zone (the hour skipped when the clocks go forward). A time
  the clocks pass twice (going back) is the first of the two; the echo shows which.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import dateparser  # type: ignore[import-untyped]

from runner.errors import UserFacingError

# More than any way of writing a time takes; a longer text is refused unread.
WHEN_MAX = 100


class WhenError(UserFacingError):
    """That is not a time I can read."""


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 60 else flat[:59] + "…"


def parse_when(text: str, now: dt.datetime, zone: str) -> dt.datetime:
    """The instant ``text`` names, aware, in ``zone``; ``now`` is naive UTC (the bot's clock).

    ``WhenError`` says, quoting ``text``, why it names no time to come."""
    typed = text.strip()
    examples = 'e.g. "friday 20:00", "tomorrow 8pm", "in 2h" or "2026-12-12 20:00"'
    if not typed:
        raise WhenError(f"No time was given: write when it starts, {examples}.")
    if len(typed) > WHEN_MAX:
        raise WhenError(f"“{_shown(typed)}” is too long to be a time (at most {WHEN_MAX} characters).")
    tz = zoneinfo.ZoneInfo(zone)
    local_now = now.replace(tzinfo=dt.UTC).astimezone(tz).replace(tzinfo=None)
    found: dt.datetime | None = dateparser.parse(
        typed,
        languages=["en"],
        settings={
            "PREFER_DATES_FROM": "future",
            "RELATIVE_BASE": local_now,
            "TIMEZONE": zone,
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
    )
    if found is None:
        raise WhenError(f"“{_shown(typed)}” is not a time I can read: write it like {examples} ({zone}).")
    wall = found.replace(tzinfo=None, microsecond=0)
    moment = wall.replace(tzinfo=tz)
    # A wall time the clocks skip comes back different from a round trip through UTC.
    if moment.astimezone(dt.UTC).astimezone(tz).replace(tzinfo=None) != wall:
        raise WhenError(
            f"“{_shown(typed)}” is {wall:%Y-%m-%d %H:%M}, a time that does not exist in {zone} "
            "(the clocks go forward then): pick another."
        )
    if moment.astimezone(dt.UTC).replace(tzinfo=None) <= now:
        raise WhenError(
            f"“{_shown(typed)}” is {wall:%Y-%m-%d %H:%M} {zone}, which has passed: give a time to come."
        )
    return moment


def shown_local(moment: dt.datetime, zone: str) -> str:
    """``moment`` as the form shows it back for editing (``2026-12-12 20:00``), in ``zone``;
    ``parse_when`` reads it back to the same minute."""
    return moment.astimezone(zoneinfo.ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M")
