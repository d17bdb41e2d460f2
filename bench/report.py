"""The printed report: the header that says what was measured on what machine, and the table
of results (one row per ``Result``)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path

from bench.backends import Backend
from bench.results import Result


def machine(backends: list[Backend]) -> list[str]:
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_total = "unknown"
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split("MemTotal:")[1].split()[0])
        memory_total = f"{kib / 1024 / 1024:.1f} GiB"
    import sqlalchemy

    return [
        f"engine: {_revision()}",
        f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"machine: {os.cpu_count()} CPUs ({cpu}), {memory_total} RAM, {platform.platform()}",
        f"python: {platform.python_version()}, SQLAlchemy {sqlalchemy.__version__}; "
        + ", ".join(b.version() for b in backends),
    ]


def _revision() -> str:
    """The commit measured, and whether runner/ or actions/ had uncommitted changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "log", "-1", "--format=%h %s"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "runner", "actions"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return head + (" (+ uncommitted changes in runner/ or actions/)" if dirty else "")


def table(results: list[Result]) -> list[str]:
    header = ("benchmark", "backend", "measured", "baseline", "ratio", "target", "result")
    rows = [
        (
            r.benchmark,
            r.backend,
            r.measured,
            r.baseline,
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target,
            {True: "pass", False: "MISS", None: "ERROR"}[r.passed],
        )
        for r in results
    ]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)]
