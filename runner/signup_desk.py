"""The sign-up lists' one door for changes: each join, leave, import and departure goes to the
store (``runner.signups``), and once it is committed ``SignupsChanged`` is published on the
runner's bus, so whatever shows a list (the sign-up message, attendee roles, event threads, the
live message) follows now. Callers (a click, the Interested import, a departure check) neither
know nor wake who follows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import signup_departures, signups
from runner.bus import LocalEventBus, SignupsChanged
from runner.signups import (
    AlreadyIn,
    AlreadyKnown,
    ImportAnswer,
    JoinAnswer,
    LeaveAnswer,
    NotSignedUp,
    Refused,
)

# Answers after which the list is as it was.
UNCHANGED = (AlreadyIn, AlreadyKnown, NotSignedUp, Refused)


class SignupDesk:
    def __init__(self, engine: AsyncEngine, bus: LocalEventBus) -> None:
        self.engine = engine
        self.bus = bus

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
        answer = await signups.join(self.engine, run_id, member_id, member_name, option, member_roles, now)
        self._changed(run_id, answer)
        return answer

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
