"""What a player sees of the events to come (``/events``): the next occurrences of every
scheduled event, booked or not, each with its open seats and the member's own place on its list
(``coming``); and the runs the member is signed up to (``mine``). No Discord: a member is an id.

Seats and places are read from the sign-up store (``runner.signups.listing``), the list the
sign-up message shows, so both agree on who holds a seat and who waits where.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog, signups
from runner.definitions import EventDefinition, SignupDefinition
from runner.errors import UnreadableDefinition
from runner.signup_answers import SignupList
from runner.sql import definitions as definitions_sql
from runner.sql import run_occurrences
from runner.sql import signups as signups_sql
from runner.states import SignupStatus
from runner.views.definitions import published_definitions, upcoming

# Occurrences per scope of each scheduled event, as ``/event upcoming`` shows staff.
PER_SCOPE = 3
# The most entries listed at all: pages of them, never an unbounded read.
MOST = 200


@dataclass(frozen=True)
class Place:
    """The member's own state on a run's list."""

    status: SignupStatus
    option: str
    # Waitlisted only: where they stand on their option's waiting list (1: next for a seat).
    place: int | None = None


@dataclass(frozen=True)
class Seats:
    # Seats still free; ``None``: no limit.
    open: int | None
    waiting: int
    # Booked: the run exists, so its list takes sign-ups (until ``closed``).
    booked: bool
    closed: bool = False


@dataclass(frozen=True)
class Coming:
    """One occurrence as a player reads it."""

    key: str
    title: str
    scope: str
    at: dt.datetime
    # ``None``: the runner creates the run nearer the time.
    run_id: int | None
    # ``None``: the event takes no sign-ups.
    seats: Seats | None
    # ``None``: not signed up.
    own: Place | None = None


def open_seats(signup: SignupDefinition, taken: Mapping[str, int]) -> int | None:
    """How many more members can get a seat: the fewer of what the options have left and what
    the event as a whole has left (``None``: neither limits it)."""
    left = [None if cap is None else max(cap - taken.get(name, 0), 0) for name, cap in signup.options.items()]
    by_options = None if None in left else sum(n or 0 for n in left)
    overall = None if signup.capacity is None else max(signup.capacity - sum(taken.values()), 0)
    if overall is None or by_options is None:
        return by_options if overall is None else overall
    return min(overall, by_options)


def place_of(listed: SignupList, member_id: str) -> Place | None:
    for option in listed.options:
        if any(s.member_id == member_id for s in option.confirmed):
            return Place(SignupStatus.CONFIRMED, option.name)
        for index, waiting in enumerate(option.waitlisted):
            if waiting.member_id == member_id:
                return Place(SignupStatus.WAITLISTED, option.name, index + 1)
    return None


def _seats(listed: SignupList, now: dt.datetime) -> Seats:
    taken = {o.name: len(o.confirmed) for o in listed.options}
    return Seats(open_seats(listed.definition, taken), len(listed.waitlisted), True, listed.is_closed(now))


async def coming(
    engine: AsyncEngine, versions: catalog.VersionCache, now: dt.datetime, member_id: str
) -> list[Coming]:
    """What is coming, soonest first, at most ``MOST``: every run booked and not started (of a
    scheduled event or one booked by hand), with its seats and ``member_id``'s place, and the
    occurrences the runner will book, every seat open. ``PER_SCOPE`` per scope of each event, as
    ``/event upcoming`` shows staff, so a daily event does not crowd the others out."""
    async with engine.connect() as conn:
        key_of = {int(r["id"]): str(r["key"]) for r in await definitions_sql.list_all(conn)}
        booked = await run_occurrences.scheduled_of_definitions(conn)
    by_key = {d.key: d for d in await published_definitions(engine, versions)}
    found: list[Coming] = []
    for run in booked:
        definition = by_key.get(key_of.get(int(run["definition_id"]), ""))
        if definition is not None:  # unreadable: the runner leaves its runs alone too
            found.append(_entry(definition, str(run["scope"]), run["scheduled_for"], int(run["id"])))
    for event in await upcoming(engine, versions, now, count=PER_SCOPE):
        definition = by_key.get(event.key)
        if definition is None:
            continue
        for scope in event.scopes:
            for occurrence in scope.occurrences:
                if not occurrence.skipped and occurrence.run_id is None:
                    found.append(_entry(definition, scope.scope, occurrence.at, None))
    found.sort(key=lambda c: (c.at, c.title, c.scope, c.run_id or 0))
    shown: Counter[tuple[str, str]] = Counter()
    kept = []
    for entry in found:
        shown[entry.key, entry.scope] += 1
        if shown[entry.key, entry.scope] <= PER_SCOPE:
            kept.append(entry)
    return [await _with_list(engine, c, now, member_id) for c in kept[:MOST]]


def _entry(definition: EventDefinition, scope: str, at: dt.datetime, run_id: int | None) -> Coming:
    seats = None if definition.signup is None else Seats(open_seats(definition.signup, {}), 0, booked=False)
    return Coming(definition.key, definition.title, scope, at, run_id, seats)


async def _with_list(engine: AsyncEngine, entry: Coming, now: dt.datetime, member_id: str) -> Coming:
    # A booked run's list is read whatever the current version says: the run keeps the
    # version it was booked with, sign-up and all.
    if entry.run_id is None:
        return entry
    listed = await signups.listing(engine, entry.run_id)
    if listed is None:
        return entry
    return Coming(
        entry.key,
        entry.title,
        entry.scope,
        entry.at,
        entry.run_id,
        _seats(listed, now),
        place_of(listed, member_id),
    )


async def mine(
    engine: AsyncEngine, versions: catalog.VersionCache, now: dt.datetime, member_id: str
) -> list[Coming]:
    """The runs in flight ``member_id`` is signed up to or waiting for, soonest first (at most
    ``MOST``), each with its seats and their place."""
    async with engine.connect() as conn:
        rows = list(await signups_sql.member_runs(conn, member_id))[:MOST]
        definitions = {}
        for row in rows:
            try:
                definitions[int(row["id"])] = await versions.get(conn, int(row["version_id"]))
            except UnreadableDefinition:
                continue  # the runner leaves such a run alone (staff are told); so does this list
    found = []
    for row in rows:
        definition = definitions.get(int(row["id"]))
        listed = await signups.listing(engine, int(row["id"]))
        own = None if listed is None else place_of(listed, member_id)
        if definition is None or listed is None or own is None:
            continue  # left meanwhile, or the list cannot be read
        found.append(
            Coming(
                definition.key,
                definition.title,
                str(row["scope"]),
                row["scheduled_for"],
                int(row["id"]),
                _seats(listed, now),
                own,
            )
        )
    return found
