"""A child process for the sign-up crash test: one ``runner.signups.leave``, stopped for good at a
chosen point so the parent can SIGKILL it there.

``--stop-after PATTERN --nth N``: right after the N-th statement whose SQL contains PATTERN has
run (inside the leave's transaction, before its COMMIT), the child prints ``stopped`` and sleeps;
``--stop-after committed``: after the leave has returned (committed), before anything delivers
the notice. The child never finishes on its own: the parent kills it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import time
from typing import Any

from sqlalchemy import event

from runner import signups
from runner.db import create_engine

COMMITTED = "committed"


def _stop() -> None:
    sys.stdout.write("stopped\n")
    sys.stdout.flush()
    # Blocks the loop, and so every statement: the transaction stays open until the SIGKILL.
    time.sleep(120)


async def main(args: argparse.Namespace) -> None:
    engine = create_engine(args.url)
    seen = 0

    def after(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        nonlocal seen
        if args.stop_after != COMMITTED and args.stop_after in statement:
            seen += 1
            if seen == args.nth:
                _stop()

    event.listen(engine.sync_engine, "after_cursor_execute", after)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await signups.leave(
        engine, args.run_id, args.member_id, args.member_name, dt.datetime.fromisoformat(args.now)
    )
    if args.stop_after == COMMITTED:
        _stop()
    sys.stdout.write("finished without stopping\n")
    sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--run-id", type=int, required=True)
    parser.add_argument("--member-id", required=True)
    parser.add_argument("--member-name", required=True)
    parser.add_argument("--now", required=True)
    parser.add_argument("--stop-after", required=True)
    parser.add_argument("--nth", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
