"""Issue 26 item 3: the worst upload under the 256 KB cap, read and checked as ``/event validate``
checks an attachment (``bot.cogs.publishing._flow._read_and_check`` in a process of its own, through
``bot.cogs.publishing._checks.run_capped`` called from a worker thread), must be answered within 2 s, and a
tick in the same process must not be held up by more than 100 ms meanwhile.

Eight worst shapes are built to just under the cap (tens of thousands of sign-up options,
scopes or unknown fields, thousands of phases, steps or reminders, aliased params, deep
brackets); the slowest is reported. The tick stand-in is a coroutine that wakes every 10 ms and
records how late it woke, measured while the checks run and, as the same run's baseline, with
nothing running. The check's own baseline is a small valid event (examples/raid-night.yaml),
checked the same way. For the record, the details also give the tick's worst delay with the
same checks run in a thread of the bot's process instead (what the bot did before), which holds
the GIL. Backend-free: reported once, on the SQLite line.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path

from bench.backends import Backend
from bench.results import Options, Result, median
from bot.cogs.publishing._checks import run_capped
from bot.cogs.publishing._flow import CHECK_SECONDS, MAX_UPLOAD_BYTES, _read_and_check
from bot.errors import BotError

ANSWER_TARGET = 2.0
DELAY_TARGET = 0.100
BEAT = 0.010
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "raid-night.yaml"
HEAD = "key: big\ntitle: Big\nschedule: manual\n"
STEP = "      - {action: core.wait, params: {duration: 1m}}\n"
ONE_STEP = f"phases:\n  - key: main\n    label: Main\n    steps:\n{STEP}"
NOW = dt.datetime(2026, 12, 5)


def _options(n: int) -> str:
    return f"{HEAD}signup:\n  channel: announcements\n  options: [{','.join(f'o{i:x}' for i in range(n))}]\n{ONE_STEP}"


def _scopes(n: int) -> str:
    return f"{HEAD}scopes: [{','.join(f's{i:x}' for i in range(n))}]\n{ONE_STEP}"


def _phases(n: int) -> str:
    one = "  - {key: p%d, label: P, steps: [{action: core.wait, params: {duration: 1m}}]}\n"
    return HEAD + "phases:\n" + "".join(one % i for i in range(n))


def _steps(n: int) -> str:
    return HEAD + ONE_STEP + STEP * n


def _reminders(n: int) -> str:
    one = "  - {before: %dm, channel: announcements, content: soon}\n"
    reminders = "".join(one % (i + 1) for i in range(n))
    return (
        HEAD.replace("manual", "{once: '2030-01-01T20:00:00+00:00'}") + "reminders:\n" + reminders + ONE_STEP
    )


def _unknown_fields(n: int) -> str:
    return HEAD + "".join(f"k{i}: 1\n" for i in range(n)) + ONE_STEP


def _aliased_params(n: int) -> str:
    nine = "[" + ", ".join(["1"] * 9) + "]"
    for _ in range(3):
        nine = "[" + ", ".join([nine] * 9) + "]"
    first = f"      - {{action: core.wait, params: &p {{duration: 1m, x: {nine}}}}}\n"
    return f"{HEAD}phases:\n  - key: main\n    label: Main\n    steps:\n{first}" + (
        "      - {action: core.wait, params: *p}\n" * n
    )


def _deep(n: int) -> str:
    nested = "[" * 90 + "1" + "]" * 90
    steps = "".join(
        f"      - {{action: core.wait, params: {{duration: 1m, x{i}: {nested}}}}}\n" for i in range(n)
    )
    return f"{HEAD}phases:\n  - key: main\n    label: Main\n    steps:\n{steps}"


SHAPES: dict[str, Callable[[int], str]] = {
    "options": _options,
    "scopes": _scopes,
    "phases": _phases,
    "steps": _steps,
    "reminders": _reminders,
    "unknown fields": _unknown_fields,
    "aliased params": _aliased_params,
    "deep brackets": _deep,
}


def _largest(make: Callable[[int], str]) -> bytes:
    low, high = 1, 200_000
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if len(make(middle).encode()) < MAX_UPLOAD_BYTES else (low, middle)
    return make(low).encode()


async def _check(name: str, data: bytes, *, in_thread: bool = False) -> float:
    """Seconds to answer ``data`` as ``check_upload`` does (or, ``in_thread``, as it did)."""
    started = time.perf_counter()
    job = (name, data, NOW, None)
    with contextlib.suppress(BotError):  # refused unread (past the reader's budget): an answer
        if in_thread:
            await asyncio.to_thread(_read_and_check, *job)
        else:
            await asyncio.to_thread(run_capped, _read_and_check, job, CHECK_SECONDS)
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


async def _delay_while(name: str, data: bytes, *, in_thread: bool = False) -> tuple[float, float]:
    task = asyncio.ensure_future(_check(name, data, in_thread=in_thread))
    delay = await _worst_delay(task, 0.0)
    return delay, await task


async def run(backend: Backend, options: Options) -> list[Result]:
    if backend.name != "sqlite":
        return []
    files = {name: _largest(make) for name, make in SHAPES.items()}
    small = EXAMPLE.read_bytes()
    await _check("warm-up.yaml", small)  # the fork server starts once per process
    repeats = 1 if options.quick else options.repeats
    answers: dict[str, list[float]] = {name: [] for name in files}
    baselines, delays, quiet, threaded = [], [], [], []
    for _ in range(repeats):
        baselines.append(await _check("small.yaml", small))
        quiet.append(await _worst_delay(None, 1.0))
        for name, data in files.items():
            delay, answer = await _delay_while(f"{name}.yaml", data)
            delays.append(delay)
            answers[name].append(answer)
    for name, data in files.items():
        threaded.append((await _delay_while(f"{name}.yaml", data, in_thread=True))[0])
    slowest = max(answers, key=lambda n: median(answers[n]))
    answer, small_answer = median(answers[slowest]), median(baselines)
    delay, quiet_delay = max(delays), max(quiet)
    details = [
        f"{name}: {len(files[name]) // 1024} KB, median {median(times) * 1000:.0f} ms"
        for name, times in answers.items()
    ] + [f"small valid event (the baseline): median {small_answer * 1000:.0f} ms"]
    return [
        Result(
            f"worst upload under {MAX_UPLOAD_BYTES // 1024} KB answered ({slowest})",
            "-",
            f"{answer:.2f} s ({answer / small_answer:.0f}x the small event)",
            f"small event {small_answer * 1000:.0f} ms",
            answer / ANSWER_TARGET,
            f"< {ANSWER_TARGET:g} s (ratio to it)",
            answer < ANSWER_TARGET,
            details,
        ),
        Result(
            "a tick's delay while uploads are checked",
            "-",
            f"{delay * 1000:.0f} ms ({delay / quiet_delay:.1f}x none)",
            f"{quiet_delay * 1000:.1f} ms with none",
            delay / DELAY_TARGET,
            f"< {DELAY_TARGET * 1000:g} ms (ratio to it)",
            delay < DELAY_TARGET,
            [
                f"10 ms beats, worst lateness per check: {', '.join(f'{d * 1000:.0f}' for d in delays)} ms",
                "the same checks in a thread of the bot's process (as before), worst lateness: "
                + ", ".join(f"{d * 1000:.0f}" for d in threaded)
                + " ms",
            ],
        ),
    ]
