"""Where a step sits (event, phase, step label, scope, start), for the text of the messages it
sends: read once per step and cached, since none of it changes once the step exists.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog, signups
from runner.definitions import REMINDERS_PHASE, PhaseDefinition
from runner.errors import UnreadableDefinition
from runner.sql import definitions as definitions_sql
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql


@dataclass(frozen=True)
class StepContext:
    """Where a step sits, for the text of the messages it sends."""

    event_key: str
    event_title: str
    phase_key: str
    phase_label: str
    step_index: int
    step_label: str | None
    scope: str
    rehearsal: bool
    # When the run's occurrence starts (naive UTC): ``{start}`` in its text.
    starts_at: dt.datetime | None = None
    # The member ids with a seat on the run's sign-up, in click order (``{attendees}``); ``None``
    # when its event has no sign-up. Read afresh each time: the list changes, the rest does not.
    attendees: tuple[str, ...] | None = None


def step_describer(
    engine: AsyncEngine, versions: catalog.VersionCache, *, cache_size: int = 4096
) -> Callable[[int, int], Awaitable[StepContext | None]]:
    """Where a step sits (event, phase, step label, scope, rehearsal), for message text.

    Everything it reads is immutable once the step exists, so answers are cached.
    """
    cache: OrderedDict[tuple[int, int], StepContext] = OrderedDict()

    async def describe(run_id: int, step_id: int) -> StepContext | None:
        key = (run_id, step_id)
        if key in cache:
            cache.move_to_end(key)
            return await _with_attendees(engine, run_id, cache[key])
        async with engine.connect() as conn:
            run = await runs_sql.get(conn, run_id)
            step = await steps_sql.get(conn, step_id)
            if run is None or step is None:
                return None
            try:
                definition = await versions.get(conn, int(run["version_id"]))
            except UnreadableDefinition:
                # The engine never dispatches such a run, but a cue already posted may be redrawn:
                # the tables still know the event's key, title and the phase's key.
                definition = None
                row = await definitions_sql.by_id(conn, int(run["definition_id"]))
        if definition is not None:
            phase = definition.phase(step["phase"])
            event_key, event_title = definition.key, definition.title

        else:
            phase = None
            event_key = row["key"] if row is not None else "?"
            event_title = row["title"] if row is not None else event_key
        context = StepContext(
            event_key=event_key,
            event_title=event_title,
            phase_key=step["phase"],
            phase_label=_phase_label(step["phase"], phase),
            step_index=int(step["seq"]),
            step_label=step["label"],
            scope=run["scope"],
            rehearsal=bool(run["rehearsal"]),
            starts_at=run["scheduled_for"],
            attendees=() if definition is not None and definition.signup is not None else None,
        )
        cache[key] = context
        if len(cache) > cache_size:
            cache.popitem(last=False)
        return await _with_attendees(engine, run_id, context)

    return describe


async def _with_attendees(engine: AsyncEngine, run_id: int, context: StepContext) -> StepContext:
    if context.attendees is None:
        return context
    return dataclasses.replace(context, attendees=tuple(await signups.attendees(engine, run_id)))


def _phase_label(key: str, phase: PhaseDefinition | None) -> str:
    if key == REMINDERS_PHASE:
        return "Reminders"
    return phase.label if phase else key
