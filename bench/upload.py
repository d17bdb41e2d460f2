"""Issue 26 item 3: the worst upload under the 256 KB cap, read and checked as ``/event validate``
checks an attachment (``bot.publishing._read_and_check`` in a worker thread), must be answered
within 2 s, and a tick in the same process must not be held up by more than 100 ms meanwhile.

Four worst shapes are built to just under the cap (tens of thousands of sign-up options or
scopes, thousands of phases or steps); the slowest is reported. The tick stand-in is a
coroutine that wakes every 10 ms and records how late it woke, measured while the checks run
and, as the same run's baseline, with nothing running. The check's own baseline is a small
valid event (examples/raid-night.yaml). Backend-free: reported once, on the SQLite line.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path

from bench.backends import Backend
from bench.results import Options, Result, median
from bot.publishing import MAX_UPLOAD_BYTES, _read_and_check

ANSWER_TARGET = 2.0
DELAY_TARGET = 0.100
BEAT = 0.010
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "raid-night.yaml"
STEP = "      - action: core.wait\n        params: {duration: 1m}\n"
HEAD = "key: big\ntitle: Big\nschedule: manual\n"


def _options(n: int) -> str:
    names = ", ".join(f"o{i}" for i in range(n))
    return f"{HEAD}signup:\n  channel: announcements\n  options: [{names}]\nphases:\n  - key: main\n    label: Main\n    steps:\n{STEP}"


def _scopes(n: int) -> str:
    names = ", ".join(f"s{i}" for i in range(n))
    return f"{HEAD}scopes: [{names}]\nphases:\n  - key: main\n    label: Main\n    steps:\n{STEP}"


def _phases(n: int) -> str:
    one = "  - {key: p%d, label: P, steps: [{action: core.wait, params: {duration: 1m}}]}\n"
    return HEAD + "phases:\n" + "".join(one % i for i in range(n))


def _steps(n: int) -> str:
    return f"{HEAD}phases:\n  - key: main\n    label: Main\n    steps:\n" + STEP * n


def _largest(make: object) -> bytes:
    build = make  # type: ignore[assignment]
    low, high = 1, 200_000
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if len(build(middle)) < MAX_UPLOAD_BYTES else (low, middle)  # type: ignore[operator]
    return str(build(low)).encode()  # type: ignore[operator]


async def _check(name: str, data: bytes) -> float:
    started = time.perf_counter()
    await asyncio.to_thread(_read_and_check, name, data, dt.datetime(2026, 12, 5))
    return time.perf_counter() - started


async def _worst_delay(work: asyncio.Future[object] | None, seconds: float) -> float:
    """The latest a 10 ms beat woke while ``work`` ran (or for ``seconds`` with none)."""
    loop = asyncio.get_running_loop()
    worst = 0.0
    until = loop.time() + seconds
    while (work is not None and not work.done()) or (work is None and loop.time() < until):
        due = loop.time() + BEAT
        await asyncio.sleep(BEAT)
        worst = max(worst, loop.time() - due)
    return worst


async def run(backend: Backend, options: Options) -> list[Result]:
    if backend.name != "sqlite":
        return []
    shapes = {"options": _options, "scopes": _scopes, "phases": _phases, "steps": _steps}
    files = {name: _largest(make) for name, make in shapes.items()}
    small = EXAMPLE.read_bytes()
    repeats = 1 if options.quick else options.repeats
    answers: dict[str, list[float]] = {name: [] for name in files}
    baselines, delays, quiet = [], [], []
    for _ in range(repeats):
        baselines.append(await _check("small.yaml", small))
        quiet.append(await _worst_delay(None, 1.0))
        for name, data in files.items():
            task = asyncio.ensure_future(_check(f"{name}.yaml", data))
            delays.append(await _worst_delay(task, 0.0))
            answers[name].append(await task)
    slowest = max(answers, key=lambda n: median(answers[n]))
    answer = median(answers[slowest])
    delay = max(delays)
    details = [
        f"{name}: {len(files[name]) // 1024} KB, median {median(times) * 1000:.0f} ms"
        for name, times in answers.items()
    ] + [f"small valid event (the baseline): median {median(baselines) * 1000:.0f} ms"]
    return [
        Result(
            f"worst upload under {MAX_UPLOAD_BYTES // 1024} KB answered ({slowest})",
            "-",
            f"{answer:.2f} s",
            f"small event {median(baselines) * 1000:.0f} ms",
            answer / ANSWER_TARGET,
            f"< {ANSWER_TARGET:g} s (ratio to it)",
            answer < ANSWER_TARGET,
            details,
        ),
        Result(
            "a tick's delay while uploads are checked",
            "-",
            f"{delay * 1000:.0f} ms",
            f"{max(quiet) * 1000:.1f} ms with none",
            delay / DELAY_TARGET,
            f"< {DELAY_TARGET * 1000:g} ms (ratio to it)",
            delay < DELAY_TARGET,
            [f"10 ms beats, worst lateness per check: {', '.join(f'{d * 1000:.0f}' for d in delays)} ms"],
        ),
    ]
