"""Durations as authors write them: seconds, or text like ``5m`` or ``1h30m``."""

from __future__ import annotations

import math
import re
from typing import Any

# ASCII digits only: Python's ``\d`` and ``float()`` also take other scripts' digits ("٣m"), which
# no author means and no reader of the file would recognise as a number.
_DURATION = re.compile(
    r"(?:([0-9]{1,9})d)?(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9}(?:\.[0-9]{1,9})?)s)?", re.ASCII
)
# Every message names the units: a new user who wrote '2 days' or '1w' was shown examples but
# never told that d is one (issue 26 item 5).
UNITS = "the units are d, h, m and s (days, hours, minutes, seconds)"
_NUMBER = re.compile(r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:e[+-]?[0-9]{1,5})?", re.ASCII)


def duration_seconds(value: str | int | float) -> float:
    """``90``, ``"90s"``, ``"5m"``, ``"1h30m"`` -> seconds. A number too large for a float is
    infinite (the caller's upper bound refuses it)."""
    if isinstance(value, bool):
        raise ValueError(
            f"a duration is a number of seconds or text like '90s', '5m', '1h30m' or '2d': {UNITS}"
        )
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
        raise ValueError(
            f"{value[:40]!r} is not a duration (use seconds, or text like '90s', '5m', '1h30m' or '2d': {UNITS})"
        )
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


def bounded_seconds(value: Any, what: str, most: int) -> float:
    """A duration as authors write it (``90``, ``"15m"``, ``"1h30m"``), more than zero and at most
    ``most`` seconds."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"{what} is a number of seconds or text like '15m', '1h30m' or '2d': {UNITS}")
    seconds = duration_seconds(value)
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError(f"{what} must be longer than zero")
    if seconds > most:
        raise ValueError(f"{what} may be at most {most // 86400} days")
    return seconds


def grace_seconds(value: Any, most: int) -> int:
    """``grace_seconds`` as authors write it: seconds, or a duration like a wait's (``10m``,
    ``90s``, ``1h``), from 0 to ``most`` seconds, stored as whole seconds (so versions stored as a number
    load as they were)."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"grace_seconds is a number of seconds or text like '10m', '90s' or '1h': {UNITS}")
    try:
        seconds = duration_seconds(value)
    except ValueError:
        shown = repr(value if len(value) <= 40 else value[:40] + "…") if isinstance(value, str) else value
        raise ValueError(
            f"{shown} is not a duration: grace_seconds is a number of seconds or text like "
            f"'10m', '90s' or '1h': {UNITS}"
        ) from None
    if math.isnan(seconds) or seconds < 0:
        raise ValueError("grace_seconds must not be negative (0 means: start on time or not at all)")
    if seconds > most:
        raise ValueError(f"grace_seconds may be at most {most // 86400} days")
    if seconds != int(seconds):
        raise ValueError("grace_seconds is whole seconds (no fractions)")
    return int(seconds)


def shown_duration(seconds: float) -> str:
    """``1h``, ``15m``, ``1h30m``: a duration as a person reads it."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts) or f"{seconds:g}s"
