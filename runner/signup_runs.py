"""A run as its sign-ups see it (``SignupRun``: its status, start, sign-up definition and
staff's override), read through one shared cache of parsed versions, and its seat pools made
before the first change takes their lock. Shared by the changes (``runner.signups``) and staff's
open or close (``runner.signup_staff``).
"""

from __future__ import annotations

import datetime as dt
import weakref
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner.catalog import VersionCache
from runner.db import retry_on_conflict
from runner.definitions import SignupDefinition
from runner.errors import UnreadableDefinition
from runner.sql import signups as sql
from runner.states import RUN_TERMINAL, RunStatus, SignupOverride

# Versions never change, so every caller in the process shares one parse of each per database.
_VERSIONS: weakref.WeakKeyDictionary[AsyncEngine, VersionCache] = weakref.WeakKeyDictionary()


def share_versions(engine: AsyncEngine, versions: VersionCache) -> None:
    """Read ``engine``'s versions through the process's own cache (the runner's), so a version
    that cannot be read is logged once in the process, not once more by sign-ups."""
    _VERSIONS[engine] = versions


def versions_of(engine: AsyncEngine) -> VersionCache:
    """The versions parsed for ``engine``'s database, shared by everything that reads sign-ups."""
    return _VERSIONS.setdefault(engine, VersionCache())


@dataclass(frozen=True)
class SignupRun:
    status: RunStatus
    starts_at: dt.datetime
    signup: SignupDefinition
    override: SignupOverride | None = None

    @property
    def closes_at(self) -> dt.datetime | None:
        if self.signup.open_until_the_end:
            return None
        return self.starts_at - dt.timedelta(seconds=self.signup.closes_before_start())


async def signup_run(conn: AsyncConnection, run_id: int) -> SignupRun | None:
    row = await sql.run_for_signup(conn, run_id)
    if row is None:
        return None
    cache = _VERSIONS.setdefault(conn.engine, VersionCache())
    try:
        signup = (await cache.get(conn, int(row["version_id"]))).signup
    except UnreadableDefinition:
        # The runner leaves such a run alone (its staff are told); so do sign-ups.
        return None
    if signup is None:
        return None
    override = SignupOverride(row["staff_override"]) if row["staff_override"] else None
    return SignupRun(RunStatus(row["status"]), row["scheduled_for"], signup, override)


def run_over(status: RunStatus) -> bool:
    return status in RUN_TERMINAL


@retry_on_conflict
async def ensure_pools(engine: AsyncEngine, run_id: int, signup: SignupDefinition) -> None:
    """The run's pools, in a transaction of their own before the first join's: the join then
    only ever locks rows that exist."""
    async with engine.begin() as conn:
        if not await sql.pools_exist(conn, run_id):
            await sql.create_pools(conn, run_id, signup.capacity, signup.options.items())
