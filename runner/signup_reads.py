"""What the sign-up tables say, read without taking the run's lock: counts per run, and the
members an Interested import passes by. The changes are ``runner.signups``'.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.sql import signups as sql
from runner.states import SignupImport, SignupStatus


async def imported_members(engine: AsyncEngine, run_id: int) -> dict[str, SignupImport]:
    """Each member imported into ``run_id`` from the Interested list, and what became of them."""
    async with engine.connect() as conn:
        rows = await sql.imports_of(conn, run_id)
    return {str(row["member_id"]): SignupImport(row["outcome"]) for row in rows}


async def known_members(engine: AsyncEngine, run_id: int) -> set[str]:
    """The members of ``run_id`` an import passes by: signed up (left too) or imported before."""
    async with engine.connect() as conn:
        return await sql.known_members(conn, run_id)


async def counts(engine: AsyncEngine, run_ids: Sequence[int]) -> dict[int, dict[SignupStatus, int]]:
    """How many are confirmed and waitlisted on each run (runs without any are left out)."""
    async with engine.connect() as conn:
        rows = await sql.counts_for_runs(conn, run_ids)
    out: dict[int, dict[SignupStatus, int]] = {}
    for row in rows:
        out.setdefault(int(row["run_id"]), {})[SignupStatus(row["status"])] = int(row["n"])
    return out
