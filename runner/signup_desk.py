"""The sign-up lists' one door for changes: each join, leave, import and departure goes to the
store (``runner.signups``), and once it is committed ``SignupsChanged`` is published on the
runner's bus, so whatever shows a list (the sign-up message, attendee roles, event threads, the
live message) follows now. Callers (a click, the Interested import, a departure check) neither
know nor wake who follows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Collection

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import history, signup_departures, signup_staff, signups
from runner.bus import LocalEventBus, SignupsChanged, StaffChangedSignups
from runner.signups import (
    AlreadyIn,
    AlreadyKnown,
    ImportAnswer,
    JoinAnswer,
    LeaveAnswer,
    NotSignedUp,
    Refused,
)
from runner.states import SignupOverride

# The most presses of one run that go into the database in one transaction.
BATCH_MAX = 200
# Answers after which the list is as it was.
UNCHANGED = (AlreadyIn, AlreadyKnown, NotSignedUp, Refused)


class SignupDesk:
    def __init__(self, engine: AsyncEngine, bus: LocalEventBus) -> None:
        self.engine = engine
        self.bus = bus
        # Presses waiting for their run's batch, and the runs whose batch is in the database.
        self._waiting: dict[int, list[tuple[signups.Click, asyncio.Future[JoinAnswer]]]] = {}
        self._draining: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def _changed(self, run_id: int, answer: object) -> None:
        if not isinstance(answer, UNCHANGED):
            self.bus.publish(SignupsChanged(run_id))

    async def join(
        self,
        run_id: int,
        member_id: str,
        member_name: str,
        option: str,
        member_roles: Collection[str],
        now: dt.datetime,
    ) -> JoinAnswer:
        """A member's press, answered once the database has decided it. Presses on one run that
        arrive while its last batch is in the database wait in line here and go in together
        (``signups.join_many``: one lock, one commit), in the order they came: a burst of
        hundreds takes one connection, not hundreds queued on the run's row lock."""
        answer: asyncio.Future[JoinAnswer] = asyncio.get_running_loop().create_future()
        click = signups.Click(member_id, member_name, option, tuple(member_roles), now)
        self._waiting.setdefault(run_id, []).append((click, answer))
        if run_id not in self._draining:
            self._draining.add(run_id)
            task = asyncio.create_task(self._drain(run_id), name=f"eventbot sign-ups of run {run_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await answer

    async def _drain(self, run_id: int) -> None:
        try:
            while self._waiting.get(run_id):
                batch = self._waiting[run_id][:BATCH_MAX]
                del self._waiting[run_id][:BATCH_MAX]
                try:
                    answers = await signups.join_many(self.engine, run_id, [click for click, _ in batch])
                except asyncio.CancelledError:
                    for _, waiting in batch:
                        waiting.cancel()
                    raise
                except Exception as exc:  # each press's own error boundary answers it
                    for _, waiting in batch:
                        if not waiting.done():
                            waiting.set_exception(exc)
                    continue
                for (_, waiting), answer in zip(batch, answers, strict=True):
                    if not waiting.done():
                        waiting.set_result(answer)
                if any(not isinstance(answer, UNCHANGED) for answer in answers):
                    self.bus.publish(SignupsChanged(run_id))
        finally:
            # No await between the last look at the line and this: a press that came after it
            # starts a drain of its own.
            self._draining.discard(run_id)
            for _, waiting in self._waiting.pop(run_id, []):
                if not waiting.done():
                    waiting.cancel()

    async def leave(self, run_id: int, member_id: str, member_name: str, now: dt.datetime) -> LeaveAnswer:
        answer = await signups.leave(self.engine, run_id, member_id, member_name, now)
        self._changed(run_id, answer)
        return answer

    async def import_interested(
        self, run_id: int, member_id: str, member_name: str, member_roles: Collection[str], now: dt.datetime
    ) -> ImportAnswer:
        answer = await signups.import_interested(
            self.engine, run_id, member_id, member_name, member_roles, now
        )
        self._changed(run_id, answer)
        return answer

    async def left_the_server(self, member_id: str, member_name: str, now: dt.datetime) -> list[LeaveAnswer]:
        """Take ``member_id`` off every list of a run in flight; what each leave answered."""
        return [
            await self.leave(run_id, member_id, member_name, now)
            for run_id in await signup_departures.runs_of(self.engine, member_id)
        ]

    # ── Staff (``/event signups add|move|remove|close|reopen``) ──────────────
    # The same seats, waiting list and promotion as a click; each change also writes a run-log
    # line naming who did it, for the staff log.

    def _staff_changed(self, run_id: int, answer: object) -> None:
        if not isinstance(answer, UNCHANGED) and answer is not False:
            self.bus.publish(SignupsChanged(run_id))
            self.bus.publish(StaffChangedSignups(run_id))

    async def add_by_staff(
        self, run_id: int, member: history.Actor, option: str, staff: history.Actor, now: dt.datetime
    ) -> JoinAnswer | NotSignedUp:
        answer = await signups.by_staff(self.engine, run_id, member, option, staff, now)
        self._staff_changed(run_id, answer)
        return answer

    async def move_by_staff(
        self, run_id: int, member: history.Actor, option: str, staff: history.Actor, now: dt.datetime
    ) -> JoinAnswer | NotSignedUp:
        answer = await signups.by_staff(self.engine, run_id, member, option, staff, now, moving=True)
        self._staff_changed(run_id, answer)
        return answer

    async def remove_by_staff(
        self, run_id: int, member: history.Actor, staff: history.Actor, now: dt.datetime
    ) -> LeaveAnswer:
        assert member.id is not None, "staff remove a member by id"
        answer = await signups.leave(self.engine, run_id, member.id, member.name, now, staff=staff)
        self._staff_changed(run_id, answer)
        return answer

    async def override(
        self, run_id: int, to: SignupOverride, staff: history.Actor, now: dt.datetime
    ) -> bool | Refused:
        """Close the run's sign-ups, or reopen them until it ends; ``False``: so already."""
        answer = await signup_staff.override(self.engine, run_id, to, staff, now)
        self._staff_changed(run_id, answer)
        return answer
