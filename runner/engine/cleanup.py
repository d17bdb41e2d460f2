"""The cleanup ledger: a cancel can undo what a run did to the world, each undo exactly once.

* **Recorded with the step.** When a step of an action declared ``reversible: automatic``
  succeeds and answers how to undo it (an ``undo`` beside its answer: the action and params
  that undo it),
  an entry is written in the step's own settle transaction: a step settled once has one entry,
  and a crash before the settle leaves none (the step is retried, and records it then). An action
  declared ``reversible: manual`` whose risk is ``moderate`` or more gets an entry too, marked
  ``manual``: staff are shown what to undo by hand, nothing runs it (a message the bot posted,
  ``notify``, is not listed).
* **Run by a cancel with cleanup.** ``/event cancel`` with cleanup (the default) sets the run's
  ``cleanup_status`` to ``pending`` in the cancel's transaction when the ledger has entries
  (``not_required`` otherwise). Each tick's ``Cleanup`` stage then undoes the pending runs'
  entries in reverse order: only a run's latest open entry is claimed, by an UPDATE the server
  answers for one claimer (``runner.sql.undos``), performed through the registry with its own
  idempotency key (the step's, suffixed), and settled. A process that dies between the request
  and the settle leaves the claim to run out; the next claimer sends the same key again, which a
  receiver that deduplicates (a webhook's ``Idempotency-Key``) makes once. ``attempts`` counts
  every claim and is never reset, so an undo that keeps killing its runner is given up on.
* **Finished once.** A transient failure is tried again after ``retry_seconds``; a terminal one,
  or one past ``max_attempts``, marks the entry ``failed`` and the cleanup carries on with the
  earlier entries. When none is open the run's ``cleanup_status`` becomes ``done`` (or ``failed``)
  by a compare-and-set from ``pending``, and the run log says so once.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.bus import LocalEventBus, RunsChanged
from runner.dispatch import Classified, perform
from runner.engine.context import EngineContext
from runner.engine.core import StageResult, TickReport
from runner.history import CleanupFinished, CleanupStarted, UndoFailed, UndoRan, record
from runner.records import RunRecord, StepRecord
from runner.registry import Envelope
from runner.sql import runs as runs_sql
from runner.sql import undos as sql
from runner.states import ActionOutcome, UndoStatus

log = logging.getLogger(__name__)

# Pending runs looked at per tick; each undoes its entries one by one, latest first.
RUNS_PER_PASS = 20
UNDO_KEY_SUFFIX = "-undo"
# Risks whose undo, when the action cannot run it, is not worth listing for staff.
QUIET_RISKS = ("none", "notify")


@dataclass(frozen=True)
class Undo:
    """How to undo a step: an action of the registry and its params."""

    action_id: str
    params: dict[str, Any]
    label: str | None = None


def undo_from(answer: object) -> Undo | str | None:
    """The ``undo`` an action answered: an ``Undo``, a problem with it (text), or None."""
    if answer is None:
        return None
    if not isinstance(answer, dict):
        return f"undo must be a mapping with action and params, not {type(answer).__name__}"
    action, params = answer.get("action"), answer.get("params", {})
    if not isinstance(action, str) or not action:
        return "undo names no action"
    if not isinstance(params, dict):
        return "undo's params must be a mapping"
    label = answer.get("label")
    return Undo(action, dict(params), str(label)[:200] if label else None)


async def record_undo(
    ctx: EngineContext,
    conn: AsyncConnection,
    step: StepRecord,
    undo: Undo | str | None,
    now: dt.datetime,
) -> None:
    """In a step's settle (done): its ledger entry, when its action is reversible."""
    action = ctx.registry.get(step.action_id)
    if action is None or action.reversible == "none":
        return
    label = step.label or step.action_id
    key = f"{step.idempotency_key}{UNDO_KEY_SUFFIX}"
    if action.reversible == "automatic" and isinstance(undo, Undo):
        await sql.record(
            conn,
            run_id=step.run_id,
            step_id=step.id,
            label=undo.label or label,
            action_id=undo.action_id,
            params=undo.params,
            idempotency_key=key,
            status=UndoStatus.RECORDED,
            now=now,
        )
        return
    if action.risk in QUIET_RISKS:
        # A message the bot posted (``notify``) is not the game world: a cancel does not ask
        # staff to delete every announcement by hand.
        return
    if isinstance(undo, str):
        log.warning("run %s step %s: %s; listed for staff to undo by hand", step.run_id, step.id, undo)
    # ``manual`` (or an automatic action that did not say how): staff are shown it.
    await sql.record(
        conn,
        run_id=step.run_id,
        step_id=step.id,
        label=label,
        action_id=None,
        params=None,
        idempotency_key=key,
        status=UndoStatus.MANUAL,
        now=now,
    )


async def begin_cleanup(conn: AsyncConnection, run_id: int, now: dt.datetime) -> None:
    """In a cancel's transaction: the run's cleanup is ``pending`` (the stage finishes it, at
    once when there is nothing to undo), and the run log says what it will undo."""
    await sql.begin_cleanup(conn, run_id)
    entries = await sql.for_run(conn, run_id)
    manual = sum(1 for e in entries if e["status"] == UndoStatus.MANUAL)
    await record(conn, run_id, CleanupStarted(len(entries) - manual, manual), now)


async def late_undo(
    ctx: EngineContext, conn: AsyncConnection, step: StepRecord, outcome: Any, now: dt.datetime
) -> None:
    """A step that succeeded after its run was cancelled: its undo is recorded too, and a
    cleanup already under way or finished picks it up."""
    if outcome.outcome is not ActionOutcome.DONE:
        return
    await record_undo(ctx, conn, step, undo_from(outcome.undo), now)
    await sql.reopen_cleanup(conn, step.run_id)


class Cleanup:
    """The tick's stage that undoes what cancelled runs did, for the runs a cancel left pending.

    It reads the database only when there may be something to do: at its first tick (a restart
    finds a cleanup the last process left), after a control in this process (a cancel with
    cleanup publishes ``RunsChanged``), while a cleanup is under way, and every
    ``RECHECK_SECONDS`` (a cancel by another process that died before its cleanup finished).
    A read on every tick would put a connection checkout in every tick for a table that is
    nearly always empty."""

    housekeeping = False
    RECHECK_SECONDS = 60.0

    def __init__(self, bus: LocalEventBus) -> None:
        self._look = True
        self._looked_at: dt.datetime | None = None
        bus.subscribe(self._controlled, {RunsChanged})

    def _controlled(self, _event: object) -> None:
        self._look = True

    async def run(self, ctx: EngineContext) -> StageResult:
        report = TickReport()
        now = ctx.clock.now()
        due = self._looked_at is None or (now - self._looked_at).total_seconds() >= self.RECHECK_SECONDS
        if not (self._look or due):
            return report
        self._look, self._looked_at = False, now
        async with ctx.engine.connect() as conn:
            pending = await sql.runs_pending(conn, RUNS_PER_PASS)
        for run_id in pending:
            try:
                await self.clean(ctx, run_id, report)
            except Exception as exc:
                report.errors.append(f"run {run_id} cleanup: {type(exc).__name__}: {exc}")
                log.exception("run %s: cleanup failed this tick", run_id, extra={"run_id": run_id})
        # A cleanup still under way (a retry's wait, another process's claim) is looked at again.
        self._look = self._look or bool(pending)
        return report

    async def clean(self, ctx: EngineContext, run_id: int, report: TickReport) -> None:
        """Undo the run's open entries, latest first, as far as they go this tick."""
        while True:
            now = ctx.clock.now()
            async with ctx.engine.begin() as conn:
                entry = await sql.last_open(conn, run_id)
                if entry is None:
                    finished = await sql.finish_cleanup(conn, run_id)
                    if finished is not None:
                        await record(conn, run_id, CleanupFinished(finished), now)
                    return
                action = ctx.registry.get(str(entry["action_id"]))
                budget = dt.timedelta(milliseconds=action.budget_ms if action else 1000)
                until = now + budget + dt.timedelta(seconds=ctx.settings.step_lease_margin_seconds)
                if not await sql.claim(conn, int(entry["id"]), ctx.owner, now, until):
                    return  # another process undoes it, or its retry time has not come
                run = await runs_sql.get(conn, run_id)
            assert run is not None
            attempts = int(entry["attempts"]) + 1
            if attempts > ctx.settings.max_attempts:
                # Its claimers kept dying before they could answer: not asked again.
                gave_up = Classified(ActionOutcome.TERMINAL, error=f"given up after {attempts - 1} attempts")
                await self._settle(ctx, run, entry, attempts - 1, gave_up)
                continue
            report.steps_dispatched += 1
            await self._settle(ctx, run, entry, attempts, await self._perform(ctx, run, entry))

    async def _perform(self, ctx: EngineContext, run: RunRecord, entry: Any) -> Any:
        envelope = Envelope(
            actor=None,
            idempotency_key=str(entry["idempotency_key"]),
            params=dict(entry["params"] or {}),
            run_id=run.id,
            scope=run.scope,
            step_id=int(entry["step_id"]),
            verify=False,
        )
        return await perform(ctx.registry, envelope, str(entry["action_id"]))

    async def _settle(
        self, ctx: EngineContext, run: RunRecord, entry: Any, attempts: int, outcome: Any
    ) -> None:
        now = ctx.clock.now()
        label = str(entry["label"] or entry["action_id"])
        undo_id = int(entry["id"])
        async with ctx.engine.begin() as conn:
            if outcome.outcome is ActionOutcome.DONE:
                if await sql.settle(conn, undo_id, ctx.owner, UndoStatus.DONE, now, result=outcome.output):
                    await record(conn, run.id, UndoRan(label, attempts), now, step_id=int(entry["step_id"]))
                return
            error = outcome.error or f"{entry['action_id']} did not answer ok"
            retry = outcome.outcome is ActionOutcome.RETRY and attempts < ctx.settings.max_attempts
            if retry:
                retry_at = now + dt.timedelta(seconds=ctx.settings.retry_seconds)
                await sql.settle(
                    conn, undo_id, ctx.owner, UndoStatus.RECORDED, now, error=error, retry_at=retry_at
                )
                return
            if await sql.settle(conn, undo_id, ctx.owner, UndoStatus.FAILED, now, error=error):
                await record(
                    conn, run.id, UndoFailed(label, error, attempts), now, step_id=int(entry["step_id"])
                )
