"""The one backoff (``runner.backoff.delay``): doubling from ``first`` up to ``cap``, shortened by
at most ``jitter`` of itself, and the same arithmetic at every place that waits before a retry."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from runner import backoff

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("runner", "bot", "actions", "cli", "wiring", "rehearsal")

attempts = st.integers(min_value=-5, max_value=200)
firsts = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)
caps = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
jitters = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
# random.random's range: 0 included, 1 not.
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True, allow_nan=False)


@given(attempt=attempts, first=firsts, cap=caps)
def test_without_jitter_each_attempt_waits_at_least_as_long_as_the_last_and_never_past_the_cap(
    attempt: int, first: float, cap: float
) -> None:
    this = backoff.delay(attempt, first=first, cap=cap)
    following = backoff.delay(attempt + 1, first=first, cap=cap)
    assert this <= following <= cap


@given(attempt=attempts, first=firsts, cap=caps)
def test_the_wait_doubles_from_first_until_it_reaches_the_cap(attempt: int, first: float, cap: float) -> None:
    expected = min(cap, first * 2.0 ** min(max(attempt, 0), 60))
    assert backoff.delay(attempt, first=first, cap=cap) == expected


@given(attempt=attempts, first=firsts, cap=caps, jitter=jitters, draw=draws)
def test_jitter_only_shortens_the_wait_and_by_at_most_its_fraction(
    attempt: int, first: float, cap: float, jitter: float, draw: float
) -> None:
    longest = backoff.delay(attempt, first=first, cap=cap)
    jittered = backoff.delay(attempt, first=first, cap=cap, jitter=jitter, draw=lambda: draw)
    assert longest * (1 - jitter) - 1e-9 * longest <= jittered <= longest <= cap
    assert jittered >= 0


def _doubling_sites(path: Path) -> list[int]:
    """Lines of ``path`` that raise 2 to a power (``2 ** n`` or ``2.0 ** n``) or double a wait
    in place (``x * 2`` inside ``min``): how a backoff of its own would be written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            if (
                isinstance(node.left, ast.Constant)
                and node.left.value == 2
                and not isinstance(node.right, ast.Constant)
            ):
                found.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min":
            for argument in node.args:
                if (
                    isinstance(argument, ast.BinOp)
                    and isinstance(argument.op, ast.Mult)
                    and isinstance(argument.right, ast.Constant)
                    and argument.right.value == 2
                ):
                    found.append(node.lineno)
    return found


def test_no_module_but_runner_backoff_computes_a_backoff_of_its_own() -> None:
    """The loop, the start-up, the conflict retry, SQLite's busy wait and the listings once each
    doubled their own waits (two of them by different formulas); now they all ask ``delay``."""
    elsewhere = {
        str(path.relative_to(ROOT)): lines
        for package in SOURCES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "runner" / "backoff.py" and (lines := _doubling_sites(path))
    }
    assert elsewhere == {}, f"a backoff computed outside runner/backoff.py: {elsewhere}"
