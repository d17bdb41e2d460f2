"""``signups RUN``: a run's sign-up list, per option, in click order: who has a seat, who waits
and where, as staff read it before they start (members by the name they had when they clicked,
and their id)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from cli.common import (
    EXIT_OK,
    CommandFailed,
    check_sqlite_location,
    database_url,
    load_config,
    on_database,
    require_schema,
)
from runner import signups
from runner.clock import utcnow
from runner.definitions import shown_duration

DESCRIPTION = (
    "Print RUN's sign-up list: per option, its seats taken and its capacity, the members with a\n"
    "seat and those on its waiting list, each with their place and click number (the order the\n"
    "waiting list is served in), then the totals and when sign-ups close. A member is named as\n"
    "they were when they clicked, with their Discord id."
)


def register(
    command: Callable[..., Any], add_database: Callable[[argparse.ArgumentParser, str], None]
) -> None:
    """The ``signups`` subcommand, added by ``cli.build_parser``."""
    sub = command(
        "signups", "print a run's sign-up list (who has a seat, who waits)", DESCRIPTION, cmd_signups
    )
    sub.add_argument("run_id", type=int, metavar="RUN", help="the run's id (from `runs` or /event status)")
    sub.add_argument("--json", action="store_true", help="one JSON object per member signed up")
    add_database(sub, "read this database")


def cmd_signups(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = database_url(args, config)
    check_sqlite_location(url, must_exist=True)

    async def read(engine: AsyncEngine) -> signups.SignupList | None:
        await require_schema(engine, url)
        return await signups.listing(engine, args.run_id)

    listed = asyncio.run(on_database(url, read))
    if listed is None:
        raise CommandFailed(
            f"run {args.run_id} does not exist or its event has no sign-up (signup: in its definition)"
        )
    if args.json:
        for option in listed.options:
            for signup in [*option.confirmed, *option.waitlisted]:
                print(json.dumps(_record(listed.run_id, signup)))
        return EXIT_OK
    print("\n".join(list_lines(listed)))
    return EXIT_OK


def _record(run_id: int, signup: signups.Signup) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "option": signup.option,
        "member_id": signup.member_id,
        "member": signup.member_name,
        "status": signup.status.value,
        "position": signup.position,
        "joined_at": signup.joined_at.isoformat(),
    }


def list_lines(listed: signups.SignupList) -> list[str]:
    state = "closed" if listed.is_closed(utcnow()) else "open"
    if listed.closes_at is None:
        lines = [f"run {listed.run_id}: sign-ups {state}, closing when the run ends"]
    else:
        closes = f"{listed.closes_at:%a %d %b %Y %H:%M} UTC"
        before = listed.definition.closes_before_start()
        when = f"{shown_duration(before)} before the start" if before else "at the start"
        lines = [f"run {listed.run_id}: sign-ups {state}, closing {closes} ({when})"]
    for option in listed.options:
        cap = f"/{option.capacity}" if option.capacity is not None else ""
        lines.append(f"{option.name} ({len(option.confirmed)}{cap}):")
        lines.extend(
            f"  {n}. {s.member_name} ({s.member_id})  confirmed  #{s.position}"
            for n, s in enumerate(option.confirmed, start=1)
        )
        lines.extend(
            f"  waiting {n}. {s.member_name} ({s.member_id})  waitlisted  #{s.position}"
            for n, s in enumerate(option.waitlisted, start=1)
        )
        if not option.confirmed and not option.waitlisted:
            lines.append("  nobody yet")
    capacity = f"/{listed.definition.capacity}" if listed.definition.capacity is not None else ""
    lines.append(f"confirmed {len(listed.confirmed)}{capacity}, waiting {len(listed.waitlisted)}")
    return lines
