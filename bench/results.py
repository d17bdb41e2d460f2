"""What a benchmark is asked (``Options``) and what it answers (``Result``, one line of the
table), with the two statistics every figure is made of."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    repeats: int = 5
    quick: bool = False


@dataclass
class Result:
    """One line of the table. ``ratio`` is measured against a baseline taken in the same run
    (or against the target itself where the issue names an absolute bound); ``target`` says
    which, in words, and ``passed`` is the verdict."""

    benchmark: str
    backend: str
    measured: str
    baseline: str
    ratio: float | None
    target: str
    passed: bool | None
    details: list[str] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): with 200 samples p99 is the 198th value, so a
    single stray sample cannot hide behind interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]
