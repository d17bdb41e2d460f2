"""The memory benchmark's child: the bot process's work on a database of 10,000 runs, reporting
its peak RSS after each stage as one JSON line. Only the standard library is imported at the top,
so the first stage is what Python itself costs.

Run by ``bench.memory`` as ``python -m bench.memory_child`` with ``EVENTBOT_BENCH_URL`` set.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
from pathlib import Path
from typing import Any

URL_VARIABLE = "EVENTBOT_BENCH_URL"


def _peak_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (this program's peak) from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _child(url: str) -> dict[str, Any]:
    stages: dict[str, float] = {"python": _peak_mb()}
    try:
        import bot.app  # noqa: F401

        imported = "bot.app"
    except Exception as exc:  # bot.app is being written by others; fall back to its parts
        import discord  # noqa: F401

        import actions  # noqa: F401
        import runner.engine  # noqa: F401
        import wiring.services  # noqa: F401

        imported = f"discord, wiring.services, runner, actions (bot.app failed: {type(exc).__name__})"
    from actions.delivery import RecordingDelivery
    from runner import views
    from wiring.services import assemble

    stages["imports"] = _peak_mb()
    from runner.db import create_engine

    engine = create_engine(url)
    try:
        services = assemble(engine, lambda describe: RecordingDelivery(), owner="bench-memory")
        stages["assembled"] = _peak_mb()
        dispatched = 0
        for _ in range(5):
            report = await services.runner.tick()
            dispatched += report.steps_dispatched
        stages["ticks"] = _peak_mb()
        listed = len(await views.list_runs(engine, limit=50))
        listed += len(await views.list_runs(engine, in_flight_only=True, limit=50))
        for summary in (await views.list_runs(engine, limit=20))[:20]:
            await views.run_view(engine, summary.id, services.versions)
        stages["views"] = _peak_mb()
    finally:
        await engine.dispose()
    return {
        "peak_mb": _peak_mb(),
        "hwm_mb": _status_mb("VmHWM"),
        "current_mb": _status_mb("VmRSS"),
        "stages": stages,
        "imported": imported,
        "dispatched": dispatched,
        "listed": listed,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_child(os.environ[URL_VARIABLE]))))
