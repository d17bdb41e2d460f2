"""Durations as authors write them: seconds, or text like ``5m`` or ``1h30m``."""

from __future__ import annotations

import math
import re

# ASCII digits only: Python's ``\d`` and ``float()`` also take other scripts' digits ("٣m"), which
# no author means and no reader of the file would recognise as a number.
_DURATION = re.compile(
    r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9}(?:\.[0-9]{1,9})?)s)?", re.ASCII
)
_NUMBER = re.compile(r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:e[+-]?[0-9]{1,5})?", re.ASCII)


def duration_seconds(value: str | int | float) -> float:
    """``90``, ``"90s"``, ``"5m"``, ``"1h30m"`` -> seconds. A number too large for a float is
    infinite (the caller's upper bound refuses it)."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like '5m' or '1h30m'")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    text = value.strip().lower()
    match = _DURATION.fullmatch(text)
    if not text or not match or not any(match.groups()):
        if _NUMBER.fullmatch(text):
            return float(text)
        raise ValueError(f"{value[:40]!r} is not a duration (use seconds, or text like '5m' or '1h30m')")
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
