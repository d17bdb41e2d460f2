"""A burst in the staff log, summed up: one line instead of hundreds.

When one pass of the staff log has more than ``BURST`` lines of one kind for one event (500
scopes starting on schedule, a cancel sent to every run of an event, one failing channel
pausing all of them), those lines become one: "▶️ 500 runs of **Raid** started on schedule:
runs 12–511, scopes a, b, … and 497 more", at the place of the first of them. Lines are of one
kind when their icon and their ``Line.group`` phrase agree (the same actor, reason or error; a
step named by its label, since every run's step has an id of its own). Up to ``BURST`` of a kind
are posted one by one, each with its link; a summary links to nothing (it has hundreds of runs).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.cogs.staff_log._lines import Line
from bot.rendering import REHEARSAL_MARK, clip, fit_list

# More than this many lines of one kind for one event in one pass are summed up.
BURST = 5
# A summary stays well inside one message (``bot.cogs.staff_log._lines.batch`` packs lines into 2,000).
RUNS_MAX = 300
SCOPES_MAX = 600
GROUP_MAX = 400

Key = tuple[tuple[str, bool], str, str]


def _key(line: Line) -> Key | None:
    if line.group is None or line.event is None:
        return None
    return (line.event, line.icon, line.group)


def summarise(lines: Sequence[Line]) -> list[Line]:
    """``lines`` with every burst replaced by its summary, in the order of the first line of
    each (the order the run log wrote them)."""
    members: dict[Key, list[Line]] = {}
    for line in lines:
        key = _key(line)
        if key is not None:
            members.setdefault(key, []).append(line)
    out: list[Line] = []
    for line in lines:
        key = _key(line)
        burst = members.get(key) if key is not None else None
        if burst is None or len(burst) <= BURST:
            out.append(line)
        elif burst[0] is line:
            out.append(summary(burst))
    return out


def summary(burst: Sequence[Line]) -> Line:
    first = burst[0]
    _, rehearsal = first.event or ("", False)
    mark = f"{REHEARSAL_MARK} " if rehearsal else ""
    runs = sorted({line.run_id for line in burst})
    # In run order (the order they were created in), not the order concurrent starts finished.
    scopes = list(dict.fromkeys(line.scope for line in sorted(burst, key=lambda x: x.run_id) if line.scope))
    body = f" {clip(first.group or '', GROUP_MAX)}: {run_ranges(runs)}"
    if scopes:
        body += fit_list(", scopes ", scopes, SCOPES_MAX, item_max=60)
    return Line(
        icon=first.icon,
        name=f"{len(runs)} runs of {mark}**{clip(first.title, 100)}**",
        body=body,
        run_id=first.run_id,
        entry_ids=tuple(sorted({i for line in burst for i in line.entry_ids})),
        linked=False,
    )


def run_ranges(run_ids: Sequence[int]) -> str:
    """``runs 12–511`` for a run of consecutive ids, ``runs 3, 7–9, 12`` otherwise, cut to fit."""
    spans: list[str] = []
    start = previous = None
    for run_id in [*run_ids, None]:
        if previous is not None and run_id == previous + 1:
            previous = run_id
            continue
        if start is not None:
            spans.append(str(start) if start == previous else f"{start}–{previous}")
        start = previous = run_id
    return fit_list("runs " if len(run_ids) > 1 else "run ", spans, RUNS_MAX)
