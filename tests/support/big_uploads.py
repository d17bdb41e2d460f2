"""The worst uploads under ``/event validate``'s 256 KB cap (issue 26 item 3): each shape made as
large as fits, and a stand-in for the check that waits to be let go (to catch the bot while an
upload is being checked)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

UPLOAD_CAP = 256 * 1024
HEAD = "key: big\ntitle: Big\nschedule: manual\n"
ONE_WAIT = "phases:\n  - key: main\n    label: Main\n    steps:\n      - action: core.wait\n        params: {duration: 1m}\n"


def options_list(n: int) -> str:
    # Hexadecimal names, no spaces: issue 26's 37,406 fit in 244 KB as its upload did.
    names = ",".join(f"o{i:x}" for i in range(n))
    return f"{HEAD}signup:\n  channel: announcements\n  options: [{names}]\n{ONE_WAIT}"


def options_mapping(n: int) -> str:
    seats = ", ".join(f"o{i}: 1" for i in range(n))
    return f"{HEAD}signup:\n  channel: announcements\n  options: {{{seats}}}\n{ONE_WAIT}"


def scopes(n: int) -> str:
    return f"{HEAD}scopes: [{','.join(f's{i:x}' for i in range(n))}]\n{ONE_WAIT}"


def phases(n: int) -> str:
    one = "  - {key: p%d, label: P, steps: [{action: core.wait, params: {duration: 1m}}]}\n"
    return HEAD + "phases:\n" + "".join(one % i for i in range(n))


def steps(n: int) -> str:
    return ONE_WAIT.join([HEAD, ""]) + "      - {action: core.wait, params: {duration: 1m}}\n" * n


def reminders(n: int) -> str:
    one = "  - {before: %dm, channel: announcements, content: soon}\n"
    return (
        HEAD.replace("manual", "{once: '2030-01-01T20:00:00+00:00'}")
        + "reminders:\n"
        + "".join(one % (i + 1) for i in range(n))
        + ONE_WAIT
    )


def unknown_fields(n: int) -> str:
    return HEAD + "".join(f"k{i}: 1\n" for i in range(n)) + ONE_WAIT


def aliased_params(n: int) -> str:
    """Every step's params one alias of a 9,999-value list: small text, ``n`` times 10,000
    values to check."""
    nine = "[" + ", ".join(["1"] * 9) + "]"
    for _ in range(3):
        nine = "[" + ", ".join([nine] * 9) + "]"
    first = f"      - {{action: core.wait, params: &p {{duration: 1m, x: {nine}}}}}\n"
    return f"{HEAD}phases:\n  - key: main\n    label: Main\n    steps:\n{first}" + (
        "      - {action: core.wait, params: *p}\n" * n
    )


def deep(n: int) -> str:
    """Params nested as deep as the reader allows, ``n`` times over."""
    nested = "[" * 90 + "1" + "]" * 90
    return f"{HEAD}phases:\n  - key: main\n    label: Main\n    steps:\n" + "".join(
        f"      - {{action: core.wait, params: {{duration: 1m, x{i}: {nested}}}}}\n" for i in range(n)
    )


SHAPES: dict[str, Callable[[int], str]] = {
    "options": options_list,
    "options-mapping": options_mapping,
    "scopes": scopes,
    "phases": phases,
    "steps": steps,
    "reminders": reminders,
    "unknown-fields": unknown_fields,
    "aliased-params": aliased_params,
    "deep": deep,
}


def largest_under_cap(make: Callable[[int], str]) -> str:
    """``make(n)`` for the largest ``n`` whose text fits under the cap."""
    low, high = 1, 200_000
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if len(make(middle).encode()) < UPLOAD_CAP else (low, middle)
    return make(low)


def held_check(started: str, release: str, name: str, data: bytes, now: dt.datetime, config: Any) -> Any:
    """``bot.cogs.publishing._flow._read_and_check`` once ``release`` exists, having written this
    process's id to ``started`` (it runs in the checking process, so it is named by module,
    not patched)."""
    import os

    from bot.cogs.publishing._flow import _read_and_check

    Path(started).write_text(str(os.getpid()))
    for _ in range(6000):
        if Path(release).exists():
            break
        time.sleep(0.01)
    return _read_and_check(name, data, now, config)
