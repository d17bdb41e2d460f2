"""A step whose condition is not met is skipped instead of run (``runner.definitions.conditions``).

Looked at just before the step would be claimed or performed: the cue it names was answered by
then (a cue blocks its phase). Skipping is one UPDATE guarded on the step being pending, or
claimed by this runner and not yet sent, and the run log says why; the run then carries on.
"""

from __future__ import annotations

from runner.definitions import EventDefinition
from runner.definitions.conditions import condition_of, met, unmet_note
from runner.engine.context import EngineContext
from runner.history import StepSkipped, record
from runner.records import RunRecord, StepRecord
from runner.sql import step_settles
from runner.sql import steps as steps_sql


async def skipped_by_condition(
    ctx: EngineContext, run: RunRecord, definition: EventDefinition, step: StepRecord
) -> bool:
    """True when ``step`` has a condition that is not met (it is skipped now, or was already)."""
    condition = condition_of(definition, step.phase, step.seq)
    if condition is None:
        return False
    now = ctx.clock.now()
    async with ctx.engine.begin() as conn:
        answered = await steps_sql.status_by_label(conn, run.id, condition.cue)
        if met(condition, answered):
            return False
        note = unmet_note(condition, answered)
        if await step_settles.skip_unmet(conn, step.id, ctx.owner, now, note):
            await record(conn, run.id, StepSkipped(note=note), now, step_id=step.id)
    return True
