"""Who should hold an event's ``attendee_role``, and who the bot has given it.

Reconciled, not evented: the desired grants are every (role, member) with the member confirmed
in some live run whose sign-up names that role; the recorded grants are what Discord accepted.
A front end adds what is desired and not recorded, and removes what is recorded and no longer
desired, recording each once Discord has accepted it. So a confirm grants the role, a leave or
the end of the run removes it, a role two runs share stays while the member is confirmed in
either, and a process that died between Discord's answer and the record repeats a request
Discord treats as a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.catalog import VersionCache
from runner.clock import Clock
from runner.errors import UnreadableDefinition
from runner.sql import attendee_roles as sql


@dataclass(frozen=True, order=True)
class Grant:
    role_id: str
    member_id: str


@dataclass(frozen=True)
class Changes:
    add: list[Grant]
    remove: list[Grant]


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


async def recorded(engine: AsyncEngine) -> set[Grant]:
    async with engine.connect() as conn:
        return {Grant(str(r["role_id"]), str(r["member_id"])) for r in await sql.grants(conn)}


async def changes(engine: AsyncEngine, versions: VersionCache, role_ids: Mapping[str, int]) -> Changes:
    want = await desired(engine, versions, role_ids)
    have = await recorded(engine)
    return Changes(sorted(want - have), sorted(have - want))


async def granted(engine: AsyncEngine, grant: Grant, clock: Clock) -> None:
    async with engine.begin() as conn:
        await sql.granted(conn, grant.role_id, grant.member_id, clock.now())


async def revoked(engine: AsyncEngine, grant: Grant) -> None:
    async with engine.begin() as conn:
        await sql.revoked(conn, grant.role_id, grant.member_id)
