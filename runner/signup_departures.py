"""A member who leaves the server leaves every sign-up they are on, as their Leave click would:
the seat goes to the first member waiting for it, once, by the same transaction a click's leave
takes (``runner.signups.leave``, through ``runner.signup_desk.SignupDesk.left_the_server``), so
two processes told of one departure promote once.

The front end finds departures by asking Discord about the members on open lists a few at a
time (``on_open_lists``), which also finds those that happened while it was offline."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.sql import signups as sql


@dataclass(frozen=True)
class OnList:
    run_id: int
    member_id: str
    member_name: str


async def on_open_lists(engine: AsyncEngine) -> list[OnList]:
    async with engine.connect() as conn:
        rows = await sql.signed_up_on_open_messages(conn)
    return [OnList(int(r["run_id"]), str(r["member_id"]), str(r["member_name"])) for r in rows]


async def runs_of(engine: AsyncEngine, member_id: str) -> list[int]:
    """The runs in flight whose lists hold ``member_id``."""
    async with engine.connect() as conn:
        return list(await sql.runs_of_member(conn, member_id))
