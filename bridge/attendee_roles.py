"""Who should hold an event's ``attendee_role``, and who the bot has given it.

Reconciled, not evented: the desired grants are every (role, member) with the member confirmed
in some live run whose sign-up names that role; the recorded grants are what the bot decided
for each. A front end adds what is desired and not recorded, and removes what is recorded and no
longer desired. So a confirm grants the role, a leave or the end of the run removes it, and a
role two runs share stays while the member is confirmed in either.

The bot takes back only what it gave. Before giving it looks at the member: one who already
holds the role is recorded ``held_before`` and never loses it. The decision to give is recorded
before Discord is asked (``given`` false), so a process that died before the answer asks again
(Discord treats a repeat as a no-op) and still takes the role back at the end. A final answer
from Discord (the member left, the role is gone, the bot may not give it) is recorded as
``stopped``: never asked again, nothing taken back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.reconcile import difference
from bridge.sql import attendee_roles as sql
from runner.catalog import VersionCache
from runner.clock import Clock
from runner.errors import UnreadableDefinition


@dataclass(frozen=True, order=True)
class Grant:
    role_id: str
    member_id: str


# Why a grant was stopped (``event_attendee_grants.stopped``).
MEMBER_LEFT = "member_left"
ROLE_GONE = "role_gone"
REFUSED = "refused"


@dataclass(frozen=True)
class Changes:
    # Desired and not recorded: look at the member, then give.
    add: list[Grant]
    # Recorded as given (or being given) and no longer desired: take back.
    remove: list[Grant]
    # Recorded as being given, Discord's answer not recorded: give again.
    retry: list[Grant] = field(default_factory=list)
    # No longer desired, and the bot gave nothing: only the record goes.
    forget: list[Grant] = field(default_factory=list)


async def desired(engine: AsyncEngine, versions: VersionCache, role_ids: Mapping[str, int]) -> set[Grant]:
    """The grants that should exist; ``role_ids`` maps the config's role aliases to ids (an
    alias the config lacks grants nothing: validation and preflight report it)."""
    wanted: set[Grant] = set()
    async with engine.connect() as conn:
        rows = await sql.confirmed_in_flight(conn)
        for row in rows:
            try:
                signup = (await versions.get(conn, int(row["version_id"]))).signup
            except UnreadableDefinition:
                continue
            if signup is None or signup.attendee_role is None:
                continue
            role_id = role_ids.get(signup.attendee_role)
            if role_id is not None:
                wanted.add(Grant(str(role_id), str(row["member_id"])))
    return wanted


async def recorded(engine: AsyncEngine) -> dict[Grant, sa.RowMapping]:
    async with engine.connect() as conn:
        return {Grant(str(r["role_id"]), str(r["member_id"])): r for r in await sql.grants(conn)}


async def changes(engine: AsyncEngine, versions: VersionCache, role_ids: Mapping[str, int]) -> Changes:
    want = await desired(engine, versions, role_ids)
    have = await recorded(engine)
    ours = {g for g, r in have.items() if not r["held_before"] and r["stopped"] is None}
    # What the bot gave and may take back is what it recorded as its own; every record counts
    # as known, so a member who held the role before is never given it.
    todo = difference(sorted(want), have.keys())
    return Changes(
        add=todo.add,
        remove=difference(sorted(want), ours).remove,
        retry=sorted(g for g in ours & want if not have[g]["given"]),
        forget=sorted(have.keys() - want - ours),
    )


async def held(engine: AsyncEngine, grant: Grant, clock: Clock) -> None:
    """The member holds the role already: theirs, never taken back."""
    async with engine.begin() as conn:
        await sql.record(conn, grant.role_id, grant.member_id, clock.now(), held_before=True, given=False)


async def giving(engine: AsyncEngine, grant: Grant, clock: Clock) -> None:
    """The bot is about to give the role (recorded before Discord is asked)."""
    async with engine.begin() as conn:
        await sql.record(conn, grant.role_id, grant.member_id, clock.now(), held_before=False, given=False)


async def granted(engine: AsyncEngine, grant: Grant, clock: Clock) -> None:
    async with engine.begin() as conn:
        await sql.record(conn, grant.role_id, grant.member_id, clock.now(), held_before=False, given=True)
        await sql.given(conn, grant.role_id, grant.member_id)


async def stopped(engine: AsyncEngine, grant: Grant, clock: Clock, reason: str) -> None:
    """Discord's answer was final: never asked again, nothing taken back."""
    async with engine.begin() as conn:
        await sql.record(conn, grant.role_id, grant.member_id, clock.now(), held_before=False, given=False)
        await sql.stopped(conn, grant.role_id, grant.member_id, reason)


async def revoked(engine: AsyncEngine, grant: Grant) -> None:
    async with engine.begin() as conn:
        await sql.revoked(conn, grant.role_id, grant.member_id)
