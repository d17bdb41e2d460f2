"""The human controls, one module that every front end calls (the bot, the CLI, the rehearsal).

Each control is a compare-and-set on the status it acts from, so a console rendered thirty
seconds ago cannot act on a run that has moved. A lost race changes nothing and answers why with a
reason code and its facts (``runner.answers``: already confirmed and by whom, the run is paused,
no such run), which each front end words in its own medium. Every control that acts writes the
run log with its actor, and wakes the run so the next step goes out at once rather than at the
next interval.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import approvals, catalog
from runner.answers import (
    CUE_ACTION,
    ControlResult,
    CueRef,
    Reason,
    confirm_refused,
    cue_ref,
    not_this_cue,
    refused_run,
    refused_step,
)
from runner.clock import Clock, SystemClock
from runner.db import retry_on_conflict
from runner.engine.cleanup import begin_cleanup
from runner.errors import UnknownDefinition
from runner.history import Actor, StepConfirmed, StepRequeued, StepSkipped, record, written_together
from runner.lifecycle import Driver, Handover, move_run
from runner.sql import run_leases, step_settles
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from runner.states import RUN_IN_FLIGHT, RUN_SETTLES_STEPS, Control, RunStatus, StepStatus

__all__ = ["CUE_ACTION", "CUE_VERBS", "Control", "ControlResult", "Controls", "CueRef", "Reason"]

# The controls a GM cue's buttons press.
CUE_VERBS = (Control.CONFIRM, Control.SKIP)

# Row ids are positive 64-bit integers. Anything else names no row, and SQLite's driver refuses
# to even bind an integer past 2**63, so such an id is answered without asking the database.
MAX_ID = 2**63 - 1


def _name(actor: Actor | None) -> str:
    """Who, in the run's ``last_error`` text, which people read as it is; the run log keeps the
    actor itself (id and name), and front ends that name people from it read it there."""
    if actor is None:
        return "staff"
    return actor.name[:100]


def _names_a_row(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID


class Controls:
    """Every control is one transaction, and on MariaDB two of them (a cancel and a GM's Confirm)
    take the same run and step rows in opposite orders: InnoDB then rolls one back with a
    deadlock. Each control is therefore run again on a lock conflict, as the engine's are, rather
    than telling a moderator the database cannot be reached."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock | None = None,
        versions: catalog.VersionCache | None = None,
        on_change: Callable[[], None] | None = None,
        driver: Driver | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock or SystemClock()
        self.versions = versions or catalog.VersionCache()
        # Called after any control that changed something: the bot uses it to tick at once.
        self._on_change = on_change
        # The runner of this process, when there is one: it drives what ``start`` creates at
        # once, instead of at the next tick.
        self.driver = driver

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    # ── start ─────────────────────────────────────────────────────────────

    @retry_on_conflict
    async def start(
        self,
        definition_key: str,
        *,
        scope: str | None = None,
        actor: Actor | None = None,
        rehearsal: bool = False,
    ) -> ControlResult:
        """Start a published event now: one run for ``scope``, or one per scope when none is
        given. A scope already in flight is refused rather than started twice."""
        now, who = self.clock.now(), actor
        said: dict[str, Any] = {"definition_key": definition_key, "rehearsal": rehearsal}
        async with self.engine.begin() as conn, written_together(conn):
            try:
                current = await catalog.current(conn, definition_key, self.versions)
            except UnknownDefinition:
                return ControlResult(False, Control.START, Reason.UNKNOWN_DEFINITION, **said)
            known = current.definition.run_scopes()
            if scope is None:
                wanted = known
            elif scope not in known:
                return ControlResult(
                    False, Control.START, Reason.NO_SUCH_SCOPE, scope=scope, scopes=tuple(known), **said
                )
            else:
                wanted = [scope]
            if not rehearsal:
                busy = await runs_sql.live_in_flight(conn, current.definition_id, wanted, now)
                if busy:
                    return ControlResult(
                        False,
                        Control.START,
                        Reason.ALREADY_IN_FLIGHT,
                        busy=tuple((s, int(rid)) for s, rid in busy),
                        **said,
                    )
            created: list[int] = []
            handed: list[catalog.StartedHere] = []
            for each in wanted:
                handover = self._handover(current, each, now, of=len(wanted))
                if handover is not None:
                    started = await catalog.create_run_started_here(
                        conn, current, each, now, handover, actor=who, rehearsal=rehearsal
                    )
                    handed.append(started)
                    created.append(started.run.id)
                    continue
                run_id = await self._create_manual_run(conn, current, each, now, who, rehearsal)
                if run_id is not None:
                    created.append(run_id)
        if not created:
            return ControlResult(False, Control.START, Reason.NOTHING_STARTED, **said)
        for started in handed:
            assert self.driver is not None
            self.driver.drive_started(started)
        if len(handed) < len(created):
            self._changed()
        return ControlResult(
            True,
            Control.START,
            Reason.STARTED,
            run_id=created[0],
            run_ids=tuple(created),
            title=current.definition.title,
            **said,
        )

    def _handover(
        self, current: catalog.CurrentDefinition, scope: str, now: dt.datetime, *, of: int
    ) -> Handover | None:
        """A start of one run is driven by this process's runner at once. A start of many
        scopes is a fan-out the ticks pace (``concurrent_runs`` at a time), as a schedule's is."""
        if self.driver is None or of != 1 or not catalog.can_start_here(current, scope):
            return None
        return self.driver.handover(current.definition.phases[0].steps[0].action, now)

    async def _create_manual_run(
        self,
        conn: AsyncConnection,
        current: catalog.CurrentDefinition,
        scope: str,
        now: dt.datetime,
        actor: Actor | None,
        rehearsal: bool,
    ) -> int | None:
        """A manual start is not an occurrence of a schedule and holds no occurrence key, so a
        rehearsal beside a live start (or two in one microsecond) never collide; the key still
        guards schedules."""
        return await catalog.create_run(
            conn, current, scope, now, now, actor=actor, rehearsal=rehearsal, manual=True
        )

    # ── pause / resume / cancel ───────────────────────────────────────────

    @retry_on_conflict
    async def pause(self, run_id: int, *, actor: Actor | None = None) -> ControlResult:
        if not _names_a_row(run_id):
            return refused_run(Control.PAUSE, None, run_id)
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if await move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                RunStatus.PAUSED,
                now,
                actor=actor,
                last_error=f"paused by {_name(actor)}",
                control=Control.PAUSE.value,
            ):
                return ControlResult(True, Control.PAUSE, Reason.PAUSED, run_id=run_id)
            run = await runs_sql.get(conn, run_id)
        if run is not None and run.status is RunStatus.PAUSED:
            return ControlResult(False, Control.PAUSE, Reason.ALREADY_PAUSED, run_id=run_id)
        return refused_run(Control.PAUSE, run, run_id)

    @retry_on_conflict
    async def resume(self, run_id: int, *, actor: Actor | None = None) -> ControlResult:
        """``paused -> running``. A run paused after a failed step carries on past it."""
        if not _names_a_row(run_id):
            return refused_run(Control.RESUME, None, run_id)
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if not await _resume(conn, run_id, now, actor, Control.RESUME.value):
                return refused_run(Control.RESUME, await runs_sql.get(conn, run_id), run_id)
        self._changed()
        return ControlResult(True, Control.RESUME, Reason.RESUMED, run_id=run_id)

    @retry_on_conflict
    async def cancel(
        self, run_id: int, *, reason: str, actor: Actor | None = None, cleanup: bool = False
    ) -> ControlResult:
        """Cancel a run in flight: pending steps and parked cues are cancelled; a step being
        carried out is left to finish (nothing can recall a command already sent). ``cleanup``:
        what the run did is undone from its ledger, latest first (``runner.engine.cleanup``)."""
        if not _names_a_row(run_id):
            return refused_run(Control.CANCEL, None, run_id)
        reason = (reason or "").strip()
        if not reason:
            return ControlResult(False, Control.CANCEL, Reason.REASON_REQUIRED, run_id=run_id)
        now = self.clock.now()
        async with self.engine.begin() as conn:
            run = await runs_sql.get_for_update(conn, run_id)
            if run is None or run.status not in RUN_IN_FLIGHT:
                return refused_run(Control.CANCEL, run, run_id)
            cues = await steps_sql.parked_cues(conn, run_id)
            ended = await move_run(
                conn,
                run_id,
                run.status,
                RunStatus.CANCELLED,
                now,
                actor=actor,
                last_error=f"cancelled by {_name(actor)}: {reason}",
                cancel_open=True,
                control="cancel",
                reason=reason,
            )
            if not ended:
                return refused_run(Control.CANCEL, await runs_sql.get(conn, run_id), run_id)
            if cleanup:
                await begin_cleanup(conn, run_id, now)
        self._changed()
        refs = tuple(CueRef(int(c["id"]), run_id, StepStatus.CANCELLED, c["result"]) for c in cues)
        return ControlResult(
            True, Control.CANCEL, Reason.CANCELLED, run_id=run_id, cues=refs, cancel_reason=reason
        )

    # ── retry ─────────────────────────────────────────────────────────────

    async def retry(self, run_id: int, *, actor: Actor | None = None) -> ControlResult:
        """Requeue the failed step the run stopped at (attempts 0, due now) and set the run
        going again. Offered only when the furthest started step of the current phase failed:
        an earlier failure the phase already carried on past is not retried behind its back."""
        if not _names_a_row(run_id):
            return refused_run(Control.RETRY, None, run_id)
        try:
            return await self._retry(run_id, actor)
        except _Raced:
            return ControlResult(False, Control.RETRY, Reason.RACED, run_id=run_id)

    @retry_on_conflict
    async def _retry(self, run_id: int, actor: Actor | None) -> ControlResult:
        now = self.clock.now()
        async with self.engine.begin() as conn:
            run = await runs_sql.get_for_update(conn, run_id)
            # A retry acts on a run that is going or paused: the statuses a step is settled in.
            if run is None or run.status not in RUN_SETTLES_STEPS:
                return refused_run(Control.RETRY, run, run_id)
            phase, step = run.current_phase, None
            seq = await steps_sql.last_started_seq(conn, run_id, phase) if phase else None
            if phase and seq is not None:
                step = await steps_sql.at_seq(conn, run_id, phase, seq)
            if step is None or step["status"] != StepStatus.FAILED:
                return ControlResult(False, Control.RETRY, Reason.NOTHING_TO_RETRY, run_id=run_id)
            if not await step_settles.requeue(conn, int(step["id"]), now):
                return ControlResult(False, Control.RETRY, Reason.NO_LONGER_FAILED, run_id=run_id)
            requeued = StepRequeued(previous_error=step["last_error"])
            await record(conn, run_id, requeued, now, step_id=int(step["id"]), actor=actor)
            if run.status is RunStatus.PAUSED:
                if not await _resume(conn, run_id, now, actor, Control.RETRY.value):
                    raise _Raced
            else:
                await run_leases.wake_now(conn, run_id, now)
        self._changed()
        return ControlResult(
            True,
            Control.RETRY,
            Reason.RETRYING,
            run_id=run_id,
            step_id=int(step["id"]),
            label=step["label"] or step["action_id"],
        )

    # ── confirm / skip ────────────────────────────────────────────────────

    async def settle_cue(
        self, step_id: int, verb: str, *, actor: Actor | None = None, message_id: str | None = None
    ) -> ControlResult:
        """What a cue's button does: confirm or skip, and only a GM cue that was posted (parked,
        or settled already, which is answered with how), and, given the pressed message's id,
        only the cue posted as that message. Any other step, a pending one above all, is refused
        and nothing changes: the step id comes from the button, not from the engine."""
        if verb not in CUE_VERBS:
            return ControlResult(False, Control.CONFIRM, Reason.NOT_A_CUE_VERB, verb=str(verb))
        if verb == Control.CONFIRM:
            return await self.confirm(step_id, actor=actor, cue_only=True, message_id=message_id)
        return await self.skip(step_id, actor=actor, cue_only=True, message_id=message_id)

    @retry_on_conflict
    async def confirm(
        self,
        step_id: int,
        *,
        actor: Actor | None = None,
        note: str | None = None,
        cue_only: bool = False,
        message_id: str | None = None,
    ) -> ControlResult:
        """Settle a parked cue as done. On a paused run the step is settled but the run does not
        move until it is resumed. ``cue_only``: refuse a step that is not a GM cue."""
        if not _names_a_row(step_id):
            return refused_step(Control.CONFIRM, None, step_id, None)
        now = self.clock.now()
        async with self.engine.begin() as conn:
            step = await steps_sql.get(conn, step_id)
            if step is None:
                return refused_step(Control.CONFIRM, None, step_id, None)
            run_id = step.run_id
            refused = confirm_refused(step, step_id, message_id, cue_only=cue_only)
            if refused is not None:
                return refused
            if not await step_settles.confirm_parked(conn, step_id, now, actor=actor, note=note):
                step = await steps_sql.get(conn, step_id)
                run = await runs_sql.get(conn, run_id)
                return refused_step(
                    Control.CONFIRM,
                    step,
                    step_id,
                    run,
                    run_id=run_id,
                    cues=(cue_ref(step, step_id, run_id, run),),
                )
            await record(conn, run_id, StepConfirmed(note), now, step_id=step_id, actor=actor)
            await run_leases.wake_now(conn, run_id, now)
            run = await runs_sql.get(conn, run_id)
            ref = CueRef(step_id, run_id, StepStatus.DONE, step.result, settled_by=actor)
        self._changed()
        return ControlResult(
            True,
            Control.CONFIRM,
            Reason.CONFIRMED,
            run_id=run_id,
            step_id=step_id,
            cues=(ref,),
            run_status=run.status if run is not None else None,
        )

    @retry_on_conflict
    async def skip(
        self,
        step_id: int,
        *,
        actor: Actor | None = None,
        note: str | None = None,
        run_id: int | None = None,
        cue_only: bool = False,
        message_id: str | None = None,
        parked_only: bool = False,
    ) -> ControlResult:
        """Skip a pending step or a parked cue (never one being carried out, never a failed one).
        ``cue_only``: only a GM cue, and only once it was posted (parked)."""
        # ``run_id`` on a refusal names the run the step was asked for in ("no such step 7 in
        # run 3"); the answer's own run is the step's.
        if not _names_a_row(step_id) or (run_id is not None and not _names_a_row(run_id)):
            return ControlResult(False, Control.SKIP, Reason.NO_SUCH_STEP, step_id=step_id, run_id=run_id)
        now = self.clock.now()
        async with self.engine.begin() as conn:
            step = await steps_sql.get(conn, step_id)
            if step is None or (run_id is not None and step.run_id != run_id):
                return ControlResult(False, Control.SKIP, Reason.NO_SUCH_STEP, step_id=step_id, run_id=run_id)
            owner_run = step.run_id
            refused = not_this_cue(Control.SKIP, step, step_id, message_id) if cue_only else None
            if refused is not None:
                return refused
            run = await runs_sql.get(conn, owner_run)
            if run is None or run.status not in RUN_IN_FLIGHT:
                ref = cue_ref(step, step_id, owner_run, run)
                return refused_run(Control.SKIP, run, owner_run, step_id=step_id, cues=(ref,))
            if not await step_settles.skip_by_human(
                conn, step_id, now, actor=actor, note=note, parked_only=cue_only or parked_only
            ):
                step = await steps_sql.get(conn, step_id)
                return refused_step(
                    Control.SKIP,
                    step,
                    step_id,
                    run,
                    run_id=owner_run,
                    cues=(cue_ref(step, step_id, owner_run, run),),
                )
            await record(conn, owner_run, StepSkipped(note), now, step_id=step_id, actor=actor)
            await run_leases.wake_now(conn, owner_run, now)
            ref = CueRef(step_id, owner_run, StepStatus.SKIPPED, step.result, settled_by=actor)
        self._changed()
        return ControlResult(
            True,
            Control.SKIP,
            Reason.SKIPPED,
            run_id=owner_run,
            step_id=step_id,
            cues=(ref,),
            run_status=run.status,
        )

    async def approve(
        self, step_id: int, *, actor: Actor | None = None, message_id: str | None = None
    ) -> ControlResult:
        """Let a step its action's risk held back run (``runner.approvals``)."""
        return await approvals.approve(self.engine, self.clock, self._changed, step_id, actor, message_id)


async def _resume(
    conn: AsyncConnection, run_id: int, now: dt.datetime, actor: Actor | None, control: str
) -> bool:
    """``paused -> running``, waking the run and clearing the error it paused on."""
    moved = await move_run(
        conn, run_id, RunStatus.PAUSED, RunStatus.RUNNING, now, actor=actor, wake_at=now, control=control
    )
    if moved:
        await runs_sql.set_last_error(conn, run_id, None, now)
    return moved


class _Raced(Exception):
    """The run moved between our read and our write inside one transaction; roll back."""
