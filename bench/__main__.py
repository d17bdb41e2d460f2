"""``python -m bench``: run every benchmark on SQLite and on a throwaway MariaDB, print one table.

Each figure is a ratio against a baseline measured in the same run (the machines are noisy),
or against the issue's absolute target where there is no sensible baseline; the table says
which. Medians over ``--repeats``. Details (per-repeat figures, statement breakdowns, EXPLAIN
plans) follow the table. Nothing here asserts: a miss is reported, not raised.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
import traceback

from bench import (
    failover,
    fanout,
    galera,
    idle,
    memory,
    peers,
    retention,
    schedule,
    signups,
    throughput,
    timeliness,
    upload,
    webhook,
)
from bench.backends import Backend, make_backend
from bench.report import machine, table
from bench.results import Options, Result

BENCHMARKS = {
    "throughput": throughput.run,
    "idle": idle.run,
    "timeliness": timeliness.run,
    "fanout": fanout.run,
    "memory": memory.run,
    "peers": peers.run,
    "schedule": schedule.run,
    "retention": retention.run,
    "failover": failover.run,
    "signups": signups.run,
    "upload": upload.run,
    "webhook": webhook.run,
    # Beside the mariadb backend only: runner processes on a three-node cluster of its own
    # (minutes, so only when asked for: --only galera).
    "galera": galera.run,
}
DEFAULT = [name for name in BENCHMARKS if name != "galera"]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "mariadb", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per figure (median); default 5")
    parser.add_argument("--quick", action="store_true", help="a fast smoke pass: fewer samples and repeats")
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT),
        help=f"comma-separated subset of: {', '.join(BENCHMARKS)} (default: all but galera)",
    )
    parser.add_argument("--details", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


async def run_backend(name: str, options: Options, only: list[str], results: list[Result]) -> Backend | None:
    started = time.monotonic()
    print(f"[bench] {name}: starting", file=sys.stderr, flush=True)
    try:
        backend = make_backend(name)
    except Exception as exc:  # e.g. no mariadbd on this machine: say so in the table
        results.append(Result("(backend)", name, "-", "-", None, "-", None, [repr(exc)]))
        return None
    for benchmark in only:
        began = time.monotonic()
        try:
            results.extend(await BENCHMARKS[benchmark](backend, options))
        except Exception as exc:
            results.append(
                Result(benchmark, name, "-", "-", None, "-", None, [traceback.format_exc(), repr(exc)])
            )
        print(
            f"[bench] {name}: {benchmark} done in {time.monotonic() - began:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    print(f"[bench] {name}: finished in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return backend


async def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    options = Options(repeats=min(args.repeats, 2) if args.quick else args.repeats, quick=args.quick)
    only = [b for b in BENCHMARKS if b in args.only.split(",")]
    names = ["sqlite", "mariadb"] if args.backend == "both" else [args.backend]
    results: list[Result] = []
    backends: list[Backend] = []
    started = time.monotonic()
    load_at_start = os.getloadavg()
    try:
        for name in names:
            backend = await run_backend(name, options, only, results)
            if backend is not None:
                backends.append(backend)
        header = machine(backends)
    finally:
        for backend in backends:
            backend.close()
    command = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"command: {command.strip()}")
    print("\n".join(header))
    print(
        "load average (1/5/15 min), start: "
        + "/".join(f"{x:.2f}" for x in load_at_start)
        + "; end: "
        + "/".join(f"{x:.2f}" for x in os.getloadavg())
        + " (other work on the machine shows here)"
    )
    print(
        f"repeats: {options.repeats}{' (quick)' if options.quick else ''}; wall time {time.monotonic() - started:.0f} s"
    )
    print()
    print("\n".join(table(results)))
    if args.details:
        for r in results:
            if r.details:
                print(f"\n## {r.benchmark} [{r.backend}]")
                print("\n".join(r.details))
    return 2 if any(r.passed is None for r in results) else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # asyncmy logs the server's notes on DDL (Alembic's migrations) as warnings; not our business.
    logging.getLogger("asyncmy").setLevel(logging.ERROR)
    sys.exit(asyncio.run(main()))
