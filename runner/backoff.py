"""The one backoff: how long to wait before a retry, as a pure function of the attempt.

Every retry in the tree takes its wait from ``delay``: the serving loop through a database
outage, the bot's start-up, a transaction that lost a lock conflict, SQLite's inline busy wait,
and a Discord event listing that failed. The conflict retry is tenacity's loop (``runner.db``),
waiting what ``delay`` says; the others keep loops of their own, which a retrying library cannot
be: a failed listing stores its next attempt's time in the database for whichever process ticks
next, and the serving loop sleeps through an injected ``sleep`` so a test drives it in virtual
time. What they all share is the arithmetic, so that is what lives here.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# 2**60 is past every cap; a larger exponent would only overflow float.
_LARGEST_EXPONENT = 60


def delay(
    attempt: int,
    *,
    first: float,
    cap: float,
    jitter: float = 0.0,
    draw: Callable[[], float] = random.random,
) -> float:
    """How long to wait before retry ``attempt`` (0 for the first retry): ``first`` doubling per
    attempt up to ``cap``, then shortened by a random fraction of itself up to ``jitter`` (0 to 1),
    so processes that failed together do not all come back in the same instant. ``draw`` is the
    random number in [0, 1) that picks the fraction (a test passes its own)."""
    longest = min(cap, first * 2.0 ** min(max(attempt, 0), _LARGEST_EXPONENT))
    return longest * (1 - jitter * draw())
