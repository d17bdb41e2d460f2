"""Staff's word over a run's sign-up schedule: close them now, or reopen them until the run
ends (``/event signups close|reopen``). The override sits on the run's ``*`` pool row and is
read under the lock every join takes, so no click is seated after a close has committed.
Adding, moving and removing a member are ``runner.signups.by_staff`` and ``leave(staff=...)``:
the same seats, waiting list and promotion as a click.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import history
from runner.db import retry_on_conflict
from runner.signup_answers import Refused, RefusedWhy
from runner.signup_runs import ensure_pools, run_over, signup_run
from runner.sql import signups as sql
from runner.states import SignupOverride


@retry_on_conflict
async def override(
    engine: AsyncEngine, run_id: int, to: SignupOverride, staff: history.Actor, now: dt.datetime
) -> bool | Refused:
    """Staff close the run's sign-ups, or reopen them until the run ends; ``False``: they were
    so already. Under the run's lock, so no click is seated after a close committed."""
    async with engine.connect() as conn:
        run = await signup_run(conn, run_id)
    if run is None:
        return Refused(RefusedWhy.NO_SIGNUP)
    await ensure_pools(engine, run_id, run.signup)
    async with engine.begin() as conn:
        await sql.lock_run(conn, run_id)
        run = await signup_run(conn, run_id)
        if run is None or run_over(run.status):
            return Refused(RefusedWhy.RUN_OVER if run else RefusedWhy.NO_SIGNUP)
        if not await sql.set_override(conn, run_id, to):
            return False
        await history.record(conn, run_id, history.SignupsOverridden(to), now, actor=staff)
        return True
