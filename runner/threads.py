"""The run's side of ``discord.thread``: which announcement a thread is started on, and the
threads started, for the bot to add attendees to and archive when the run ends."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner.clock import Clock
from runner.sql import threads as sql


@dataclass(frozen=True)
class Announced:
    channel_id: str
    message_id: str


@dataclass(frozen=True)
class RunThread:
    run_id: int
    thread_id: str
    channel_id: str
    step_id: int

    @property
    def in_discord(self) -> bool:
        """A Discord thread's id is a snowflake; an offline rehearsal's console names its own."""
        return self.thread_id.isascii() and self.thread_id.isdigit()


class RunThreads:
    """``actions.threads.ThreadStore`` on the database."""

    def __init__(self, engine: AsyncEngine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    async def announcement(self, run_id: int, label: str | None) -> Announced | None:
        """The run's latest posted announcement (labelled ``label``, when given)."""
        async with self.engine.connect() as conn:
            rows = await sql.announcements(conn, run_id, label)
        for row in rows:
            posted = (row["result"] or {}).get("posted") if isinstance(row["result"], dict) else None
            if isinstance(posted, dict) and posted.get("message_id") and posted.get("channel_id"):
                return Announced(str(posted["channel_id"]), str(posted["message_id"]))
        return None

    async def record(self, run_id: int, step_id: int, channel_id: str, thread_id: str) -> None:
        async with self.engine.begin() as conn:
            await sql.record(conn, run_id, step_id, channel_id, thread_id, self.clock.now())


def _thread(row: sql.Row) -> RunThread:
    return RunThread(int(row["run_id"]), str(row["thread_id"]), str(row["channel_id"]), int(row["step_id"]))


async def to_archive(engine: AsyncEngine, limit: int = 50) -> list[RunThread]:
    """Open threads of runs that have ended."""
    async with engine.connect() as conn:
        return [_thread(r) for r in await sql.to_archive(conn, limit)]


async def open_in_flight(engine: AsyncEngine) -> list[RunThread]:
    async with engine.connect() as conn:
        return [_thread(r) for r in await sql.of_runs_in_flight(conn)]


async def of_run(engine: AsyncEngine, run_id: int) -> list[RunThread]:
    async with engine.connect() as conn:
        return [_thread(r) for r in await sql.of_run(conn, run_id)]


async def archived(engine: AsyncEngine, thread: RunThread, clock: Clock) -> None:
    async with engine.begin() as conn:
        await sql.archived(conn, thread.run_id, thread.thread_id, clock.now())


async def members_added(engine: AsyncEngine, thread_id: str) -> set[str]:
    async with engine.connect() as conn:
        return await sql.members_added(conn, thread_id)


async def member_added(engine: AsyncEngine, thread_id: str, member_id: str, clock: Clock) -> None:
    async with engine.begin() as conn:
        await sql.member_added(conn, thread_id, member_id, clock.now())
