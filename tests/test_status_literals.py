"""The status words are spelled in ``runner/states.py`` and read from its enums everywhere else
(issue 21, item 3: "enums to the edge").

A word such as ``"paused"`` or ``"skip"`` written out as a string in product code is a status
that can drift from the enum the store and the state machines use. The count is the issue's
own measure (a ``grep`` over the product packages, ``runner/states.py`` left out), so it also
sees words that only look like statuses; the few of those left are each a column name, a field
name, a log word or a reason code, and stay under ``MOST``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runner", "bot", "actions", "cli", "wiring", "rehearsal", "bridge")
STATES = Path("runner") / "states.py"
WORDS = (
    "scheduled|starting|running|paused|ending|completed|cancelled|failed|missed|ok|degraded|"
    "stalled|pending|done|skipped|skip|pause|abort_run|parked|retry|terminal|confirmed|waitlisted"
)
QUOTED_WORD = re.compile(rf"[\"']({WORDS})[\"']")
# Issue 21 started this at 102. What is left is not a status: the work leases' ``done`` column
# (its name in the schema and the row key that reads it), ControlResult's ``ok`` field, four of the
# reason codes (``Reason.PAUSED`` …), the delivery log's "terminal" failure and the rehearsal's
# --json reminder outcome.
MOST = 8


def quoted_words(path: Path) -> list[str]:
    """Each quoted status word in ``path``, as ``path:line:"word"`` (what ``grep -no`` prints)."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        found.extend(f"{path.relative_to(ROOT)}:{number}:{m.group(0)}" for m in QUOTED_WORD.finditer(line))
    return found


def product_files() -> list[Path]:
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    assert files, "no product source found"
    return files


def test_the_count_sees_the_words_where_they_are_spelled() -> None:
    # Without this, a pattern or a walk that found nothing would pass the test below.
    in_states = quoted_words(ROOT / STATES)
    assert any(hit.endswith('"paused"') for hit in in_states), in_states


def test_status_words_outside_runner_states_stay_few() -> None:
    hits = [hit for path in product_files() if path.relative_to(ROOT) != STATES for hit in quoted_words(path)]
    assert len(hits) <= MOST, (
        f"{len(hits)} quoted status words outside {STATES} (at most {MOST}); read them from the "
        "enums in runner/states.py instead:\n" + "\n".join(hits)
    )
