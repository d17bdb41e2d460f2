"""Memory: the bot process's peak RSS with 10,000 runs stored (target <= 120 MB).

The parent seeds a database with 10,000 runs (history, future schedules, waits, parked cues and
100 due now), then starts a child process that does what the bot process does with it: import
the bot (``bot.app``, which pulls in discord.py and every bot module; the runner and actions
directly if that import fails), assemble the services on the production engine, tick until the
due runs have gone as far as they can, and list runs as the ``/event`` views do. The child
reports ``ru_maxrss`` at each stage. Baseline: a child that only starts Python.

The child is ``bench/memory_child.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.backends import Backend, fresh_database
from bench.memory_child import URL_VARIABLE
from bench.results import Options, Result, median
from bench.workloads import seed_runs
from runner.db import create_engine

RUNS = 10_000
DUE = 100
TARGET_MB = 120.0
ROOT = Path(__file__).resolve().parent.parent


def _spawn(args: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``args`` as a grandchild of a shell, and answer its stdout.

    Linux keeps ``ru_maxrss`` across fork and exec: a child forked straight from this process
    (about 100 MB by now) would report our peak, not its own. A shell that forks again (the
    ``; exit`` stops it from exec'ing in place) hands the child a fresh, small high-water mark.
    """
    out = subprocess.run(
        ["/bin/sh", "-c", '"$0" "$@"; exit $?', *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{args[1:3]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


def _run_child(url: str) -> dict[str, Any]:
    out = _spawn([sys.executable, "-m", "bench.memory_child"], env={**os.environ, URL_VARIABLE: url})
    return json.loads(out.strip().splitlines()[-1])


def _bare_python() -> float:
    code = "import resource, sys; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    return int(_spawn([sys.executable, "-c", code]).strip()) / 1024


async def run(backend: Backend, options: Options) -> list[Result]:
    repeats = max(1, min(options.repeats, 1 if options.quick else 3))
    children = []
    bare = []
    for _ in range(repeats):
        # A fresh database each time: the child's ticks move the due runs on.
        async with fresh_database(backend) as url:
            engine = create_engine(url)
            try:
                made = await seed_runs(
                    engine, RUNS - DUE, kinds=("completed", "scheduled", "waiting", "parked")
                )
                made.update(await seed_runs(engine, DUE, kinds=("due",), scope_prefix="due"))
            finally:
                await engine.dispose()
            bare.append(await asyncio.to_thread(_bare_python))
            children.append(await asyncio.to_thread(_run_child, url))
    peak = median([c["peak_mb"] for c in children])
    baseline = median(bare)
    sample = children[len(children) // 2]
    return [
        Result(
            f"peak RSS, bot process, {RUNS // 1000}k runs",
            backend.name,
            f"{peak:.1f} MB",
            f"{baseline:.1f} MB bare python",
            peak / baseline,
            f"<= {TARGET_MB:.0f} MB absolute",
            peak <= TARGET_MB,
            [
                f"runs stored: {', '.join(f'{n} {k}' for k, n in made.items())}; imported {sample['imported']}; "
                f"steps dispatched by the child's ticks: {sample['dispatched']}",
                "peak RSS after each stage (MB): "
                + ", ".join(f"{k} {v:.1f}" for k, v in sample["stages"].items())
                + f"; VmHWM {sample['hwm_mb']:.1f}; RSS at exit {sample['current_mb']:.1f}",
                f"{repeats} repeats, peaks (MB): " + ", ".join(f"{c['peak_mb']:.1f}" for c in children),
            ],
        )
    ]
