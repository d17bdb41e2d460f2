"""The run's side of ``discord.thread``: which announcement a thread is started on, and the
threads started, for the bot to keep to the run's confirmed attendees and archive when the run
ends.

Membership is reconciled as the attendee role is (``bridge.attendee_roles``): the members who
should be in a thread are the run's confirmed attendees; the recorded members are those Discord
accepted the bot adding and has not yet accepted it taking out. A front end adds the first not
recorded and removes the recorded no longer confirmed (a leave, a move to the waiting list),
recording each once Discord has answered, so a restart neither repeats nor forgets either. Only
members the bot added are ever removed: someone who joined the thread on their own stays."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.reconcile import difference
from bridge.sql import threads as sql
from runner import signups
from runner.clock import Clock


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


async def member_removed(engine: AsyncEngine, thread_id: str, member_id: str) -> None:
    async with engine.begin() as conn:
        await sql.member_removed(conn, thread_id, member_id)


@dataclass(frozen=True)
class MembershipChanges:
    add: list[str]
    remove: list[str]


async def membership_changes(engine: AsyncEngine, thread: RunThread) -> MembershipChanges:
    """Who to add to ``thread`` (confirmed, not recorded; in click order) and who to take out
    (recorded, no longer confirmed). Asked only of a run in flight: once the run ends its thread
    is archived with everyone in it."""
    todo = difference(
        await signups.attendees(engine, thread.run_id), await members_added(engine, thread.thread_id)
    )
    return MembershipChanges(add=todo.add, remove=todo.remove)
