"""The human controls, one module that every front end calls (the bot, the CLI, the rehearsal).

Each control is a compare-and-set on the status it acts from, so a console rendered thirty
seconds ago cannot act on a run that has moved. A lost race changes nothing and answers, in words
a moderator understands, why ("already confirmed", "the run is paused", "no such run"). Every
control that acts writes the run log with its actor, and wakes the run so the next step goes out
at once rather than at the next interval.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner import catalog
from runner.clock import Clock, SystemClock
from runner.db import retry_on_conflict
from runner.errors import UnknownDefinition
from runner.lifecycle import end_run
from runner.schema import RUN_IN_FLIGHT, RUN_TERMINAL
from runner.sql import run_log
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql


@dataclass(frozen=True)
class CueRef:
    """Where a cue was posted, so a front end can bring its message up to date."""

    step_id: int
    run_id: int
    status: str
    result: dict[str, Any] | None


@dataclass(frozen=True)
class ControlResult:
    ok: bool
    message: str
    run_id: int | None = None
    step_id: int | None = None
    run_ids: tuple[int, ...] = ()
    cues: tuple[CueRef, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return self.ok


# The action whose steps carry Confirm / Skip buttons. A button names its step by id in a custom
# id; ``settle_cue`` refuses any step of another action, so a forged id cannot skip an
# announcement that has not gone out.
CUE_ACTION = "gm.cue"
CUE_VERBS = ("confirm", "skip")

MANUAL_START_ATTEMPTS = 8
# Row ids are positive 64-bit integers. Anything else names no row, and SQLite's driver refuses
# to even bind an integer past 2**63, so such an id is answered without asking the database.
MAX_ID = 2**63 - 1


def _names_a_row(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID


_ENDED_WORDS = {
    "completed": "the run has already completed",
    "cancelled": "the run was cancelled",
    "failed": "the run has failed and ended",
    "missed": "the run was missed (it did not start within its grace window)",
}


def _posted_message(step: Any) -> str | None:
    """The message id a cue step's action answered it was posted as, if it says."""
    result = step["result"]
    posted = result.get("posted") if isinstance(result, dict) else None
    message_id = posted.get("message_id") if isinstance(posted, dict) else None
    return str(message_id) if message_id is not None else None


def _not_this_cue(step: Any, step_id: int, message_id: str | None) -> ControlResult | None:
    """Why a cue button may not act on ``step``: it is no GM cue, or the cue was posted as
    another message than the one whose button was pressed (a stale or copied custom id)."""
    if step["action_id"] != CUE_ACTION:
        return ControlResult(False, f"step {step_id} is not a GM cue", step_id=step_id)
    posted = _posted_message(step)
    if message_id is not None and posted is not None and posted != message_id:
        return ControlResult(False, "this button belongs to another cue message", step_id=step_id)
    return None


def explain_run(run: Any | None, run_id: int) -> str:
    """Why a control could not act on this run, in a moderator's words."""
    if run is None:
        return f"no such run: {run_id}"
    status = run["status"]
    if status in _ENDED_WORDS:
        return _ENDED_WORDS[status]
    return {
        "scheduled": "the run has not started yet",
        "starting": "the run is starting",
        "running": "the run is running",
        "paused": "the run is paused",
        "ending": "the run is finishing",
    }[status]


def explain_step(step: Any | None, step_id: int, run: Any | None = None) -> str:
    """Why a confirm or skip could not act on this step."""
    if step is None:
        return f"no such step: {step_id}"
    status = step["status"]
    if status in ("pending", "running") and run is not None and run["status"] in RUN_TERMINAL:
        # Left open on a run that ended (only a step out being dispatched can be): the run is
        # the reason, whatever the step looks like.
        return _ENDED_WORDS[run["status"]]
    by = f" by {step['settled_by']}" if step["settled_by"] else ""
    if status == "done":
        return f"already confirmed{by}" if step["settled_by"] else "that step is already done"
    if status == "skipped":
        return f"already skipped{by}"
    if status == "cancelled":
        if run is not None and run["status"] in RUN_TERMINAL:
            return f"{_ENDED_WORDS[run['status']]}, so this step was cancelled"
        return "that step was cancelled"
    if status == "failed":
        return "that step failed; use retry, or resume to carry on past it"
    if status == "running" and step["claim_expires_at"] is not None:
        return "that step is being carried out right now; try again in a moment"
    if status == "pending":
        return "that step has not been reached yet"
    return f"that step is {status}"


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
    ) -> None:
        self.engine = engine
        self.clock = clock or SystemClock()
        self.versions = versions or catalog.VersionCache()
        # Called after any control that changed something: the bot uses it to tick at once.
        self._on_change = on_change

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
        actor: str | None = None,
        rehearsal: bool = False,
    ) -> ControlResult:
        """Start a published event now: one run for ``scope``, or one per scope when none is
        given. A scope already in flight is refused rather than started twice."""
        now = self.clock.now()
        async with self.engine.begin() as conn:
            try:
                current = await catalog.current(conn, definition_key, self.versions)
            except UnknownDefinition as exc:
                return ControlResult(False, exc.message)
            known = current.definition.run_scopes()
            if scope is None:
                wanted = known
            elif scope not in known:
                listed = ", ".join(s for s in known if s) or "none (leave the scope empty)"
                return ControlResult(
                    False, f"{definition_key} has no scope {scope!r}; its scopes are: {listed}"
                )
            else:
                wanted = [scope]
            if not rehearsal:
                busy = await runs_sql.live_in_flight(conn, current.definition_id, wanted, now)
                if busy:
                    where = ", ".join(f"{s or 'the event'} (run {rid})" for s, rid in busy)
                    return ControlResult(False, f"{definition_key} is already in flight: {where}")
            created: list[int] = []
            for each in wanted:
                run_id = await self._create_manual_run(conn, current, each, now, actor, rehearsal)
                if run_id is not None:
                    created.append(run_id)
        if not created:
            return ControlResult(False, "nothing was started: those runs already exist")
        self._changed()
        title = current.definition.title
        which = "rehearsal of " if rehearsal else ""
        if len(created) == 1:
            message = f"started {which}{title} as run {created[0]}"
        else:
            message = f"started {which}{title} in {len(created)} scopes: runs {', '.join(map(str, created))}"
        return ControlResult(True, message, run_id=created[0], run_ids=tuple(created))

    async def _create_manual_run(
        self,
        conn: AsyncConnection,
        current: catalog.CurrentDefinition,
        scope: str,
        now: dt.datetime,
        actor: str | None,
        rehearsal: bool,
    ) -> int | None:
        """A manual start is not an occurrence of a schedule: if another run of this event and
        scope was created in the same microsecond (a rehearsal beside a live start, a fast
        clock), step past it rather than refuse. The occurrence key still guards schedules."""
        for offset in range(MANUAL_START_ATTEMPTS):
            moment = now + dt.timedelta(microseconds=offset)
            run_id = await catalog.create_run(
                conn, current, scope, moment, now, actor=actor, rehearsal=rehearsal
            )
            if run_id is not None:
                return run_id
        return None

    # ── pause / resume / cancel ───────────────────────────────────────────

    @retry_on_conflict
    async def pause(self, run_id: int, *, actor: str | None = None) -> ControlResult:
        if not _names_a_row(run_id):
            return ControlResult(False, f"cannot pause: no such run: {run_id}")
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if await runs_sql.transition(
                conn, run_id, "running", "paused", now, error=f"paused by {actor or 'staff'}"
            ):
                await run_log.write(
                    conn,
                    run_id,
                    "run.status",
                    now,
                    actor=actor,
                    detail={"from": "running", "to": "paused", "control": "pause"},
                )
                return ControlResult(True, f"run {run_id} paused", run_id=run_id)
            run = await runs_sql.get(conn, run_id)
        if run is not None and run["status"] == "paused":
            return ControlResult(False, "the run is already paused", run_id=run_id)
        return ControlResult(False, f"cannot pause: {explain_run(run, run_id)}", run_id=run_id)

    @retry_on_conflict
    async def resume(self, run_id: int, *, actor: str | None = None) -> ControlResult:
        """``paused -> running``. A run paused after a failed step carries on past it."""
        if not _names_a_row(run_id):
            return ControlResult(False, f"cannot resume: no such run: {run_id}")
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if await _resume(conn, run_id, now, actor, "resume"):
                result = ControlResult(True, f"run {run_id} resumed", run_id=run_id)
            else:
                run = await runs_sql.get(conn, run_id)
                return ControlResult(False, f"cannot resume: {explain_run(run, run_id)}", run_id=run_id)
        self._changed()
        return result

    @retry_on_conflict
    async def cancel(self, run_id: int, *, reason: str, actor: str | None = None) -> ControlResult:
        """Cancel a run in flight: pending steps and parked cues are cancelled; a step being
        carried out is left to finish (nothing can recall a command already sent)."""
        if not _names_a_row(run_id):
            return ControlResult(False, f"cannot cancel: no such run: {run_id}")
        reason = (reason or "").strip()
        if not reason:
            return ControlResult(
                False, "a cancel needs a reason (it goes in the run's history)", run_id=run_id
            )
        now = self.clock.now()
        async with self.engine.begin() as conn:
            run = await runs_sql.get_for_update(conn, run_id)
            if run is None or run["status"] not in RUN_IN_FLIGHT:
                return ControlResult(False, f"cannot cancel: {explain_run(run, run_id)}", run_id=run_id)
            cues = await steps_sql.parked_cues(conn, run_id)
            error = f"cancelled by {actor or 'staff'}: {reason}"
            detail = {"from": run["status"], "control": "cancel", "reason": reason}
            ended = await end_run(
                conn, run_id, run["status"], "cancelled", now, error=error, detail=detail, actor=actor
            )
            if ended is None:
                run = await runs_sql.get(conn, run_id)
                return ControlResult(False, f"cannot cancel: {explain_run(run, run_id)}", run_id=run_id)
        self._changed()
        refs = tuple(CueRef(int(c["id"]), run_id, "cancelled", c["result"]) for c in cues)
        return ControlResult(True, f"run {run_id} cancelled: {reason}", run_id=run_id, cues=refs)

    # ── retry ─────────────────────────────────────────────────────────────

    async def retry(self, run_id: int, *, actor: str | None = None) -> ControlResult:
        """Requeue the failed step the run stopped at (attempts 0, due now) and set the run
        going again. Offered only when the furthest started step of the current phase failed:
        an earlier failure the phase already carried on past is not retried behind its back."""
        if not _names_a_row(run_id):
            return ControlResult(False, f"cannot retry: no such run: {run_id}")
        try:
            return await self._retry(run_id, actor)
        except _Raced:
            return ControlResult(
                False, "the run changed while retrying; nothing was changed, try again", run_id=run_id
            )

    @retry_on_conflict
    async def _retry(self, run_id: int, actor: str | None) -> ControlResult:
        now = self.clock.now()
        async with self.engine.begin() as conn:
            run = await runs_sql.get_for_update(conn, run_id)
            if run is None or run["status"] not in ("running", "paused"):
                return ControlResult(False, f"cannot retry: {explain_run(run, run_id)}", run_id=run_id)
            phase = run["current_phase"]
            seq = await steps_sql.last_started_seq(conn, run_id, phase) if phase else None
            step = await steps_sql.at_seq(conn, run_id, phase, seq) if seq is not None else None
            if step is None or step["status"] != "failed":
                return ControlResult(
                    False, "nothing to retry: the run has not stopped at a failed step", run_id=run_id
                )
            if not await steps_sql.requeue(conn, int(step["id"]), now):
                return ControlResult(False, "nothing to retry: that step is no longer failed", run_id=run_id)
            await run_log.write(
                conn,
                run_id,
                "step.requeued",
                now,
                step_id=step["id"],
                actor=actor,
                detail={"previous_error": step["last_error"]},
            )
            if run["status"] == "paused":
                if not await _resume(conn, run_id, now, actor, "retry"):
                    raise _Raced
            else:
                await runs_sql.nudge(conn, run_id, now)
        self._changed()
        label = step["label"] or step["action_id"]
        return ControlResult(
            True,
            f"retrying step {step['id']} ({label}) of run {run_id}",
            run_id=run_id,
            step_id=int(step["id"]),
        )

    # ── confirm / skip ────────────────────────────────────────────────────

    async def settle_cue(
        self, step_id: int, verb: str, *, actor: str | None = None, message_id: str | None = None
    ) -> ControlResult:
        """What a cue's button does: confirm or skip, and only a GM cue that was posted (parked,
        or settled already, which is answered with how), and, given the pressed message's id,
        only the cue posted as that message. Any other step, a pending one above all, is refused
        and nothing changes: the step id comes from the button, not from the engine."""
        if verb not in CUE_VERBS:
            return ControlResult(False, f"a cue answers {' or '.join(CUE_VERBS)}, not {verb!r}")
        if verb == "confirm":
            return await self.confirm(step_id, actor=actor, cue_only=True, message_id=message_id)
        return await self.skip(step_id, actor=actor, cue_only=True, message_id=message_id)

    @retry_on_conflict
    async def confirm(
        self,
        step_id: int,
        *,
        actor: str | None = None,
        note: str | None = None,
        cue_only: bool = False,
        message_id: str | None = None,
    ) -> ControlResult:
        """Settle a parked cue as done. On a paused run the step is settled but the run does not
        move until it is resumed. ``cue_only``: refuse a step that is not a GM cue."""
        if not _names_a_row(step_id):
            return ControlResult(False, f"no such step: {step_id}")
        now = self.clock.now()
        async with self.engine.begin() as conn:
            step = await steps_sql.get(conn, step_id)
            if step is None:
                return ControlResult(False, f"no such step: {step_id}", step_id=step_id)
            run_id = int(step["run_id"])
            refused = _not_this_cue(step, step_id, message_id) if cue_only else None
            if refused is not None:
                return refused
            if await steps_sql.confirm_parked(conn, step_id, now, actor=actor, note=note):
                await run_log.write(
                    conn, run_id, "step.confirmed", now, step_id=step_id, actor=actor, detail={"note": note}
                )
                await runs_sql.nudge(conn, run_id, now)
                run = await runs_sql.get(conn, run_id)
                ref = CueRef(step_id, run_id, "done", step["result"])
            else:
                step = await steps_sql.get(conn, step_id)
                run = await runs_sql.get(conn, run_id)
                ref = CueRef(
                    step_id, run_id, step["status"] if step else "missing", step["result"] if step else None
                )
                return ControlResult(
                    False, explain_step(step, step_id, run), run_id=run_id, step_id=step_id, cues=(ref,)
                )
        self._changed()
        suffix = (
            "; the run is paused and will carry on when resumed" if run and run["status"] == "paused" else ""
        )
        return ControlResult(True, f"confirmed{suffix}", run_id=run_id, step_id=step_id, cues=(ref,))

    @retry_on_conflict
    async def skip(
        self,
        step_id: int,
        *,
        actor: str | None = None,
        note: str | None = None,
        run_id: int | None = None,
        cue_only: bool = False,
        message_id: str | None = None,
    ) -> ControlResult:
        """Skip a pending step or a parked cue (never one being carried out, never a failed one).
        ``cue_only``: only a GM cue, and only once it was posted (parked)."""
        if not _names_a_row(step_id) or (run_id is not None and not _names_a_row(run_id)):
            return ControlResult(
                False, f"no such step: {step_id}" + (f" in run {run_id}" if run_id is not None else "")
            )
        now = self.clock.now()
        async with self.engine.begin() as conn:
            step = await steps_sql.get(conn, step_id)
            if step is None or (run_id is not None and int(step["run_id"]) != run_id):
                return ControlResult(
                    False,
                    f"no such step: {step_id}" + (f" in run {run_id}" if run_id else ""),
                    step_id=step_id,
                )
            owner_run = int(step["run_id"])
            refused = _not_this_cue(step, step_id, message_id) if cue_only else None
            if refused is not None:
                return refused
            run = await runs_sql.get(conn, owner_run)
            if run is None or run["status"] not in RUN_IN_FLIGHT:
                ref = CueRef(step_id, owner_run, step["status"], step["result"])
                return ControlResult(
                    False,
                    f"cannot skip: {explain_run(run, owner_run)}",
                    run_id=owner_run,
                    step_id=step_id,
                    cues=(ref,),
                )
            if await steps_sql.skip_by_human(
                conn, step_id, now, actor=actor, note=note, parked_only=cue_only
            ):
                await run_log.write(
                    conn, owner_run, "step.skipped", now, step_id=step_id, actor=actor, detail={"note": note}
                )
                await runs_sql.nudge(conn, owner_run, now)
                ref = CueRef(step_id, owner_run, "skipped", step["result"])
            else:
                step = await steps_sql.get(conn, step_id)
                ref = CueRef(
                    step_id,
                    owner_run,
                    step["status"] if step else "missing",
                    step["result"] if step else None,
                )
                return ControlResult(
                    False, explain_step(step, step_id, run), run_id=owner_run, step_id=step_id, cues=(ref,)
                )
        self._changed()
        suffix = "; the run is paused and will carry on when resumed" if run["status"] == "paused" else ""
        return ControlResult(True, f"skipped{suffix}", run_id=owner_run, step_id=step_id, cues=(ref,))


async def _resume(
    conn: AsyncConnection, run_id: int, now: dt.datetime, actor: str | None, control: str
) -> bool:
    """``paused -> running``, waking the run and clearing the error it paused on."""
    if not await runs_sql.transition(conn, run_id, "paused", "running", now, wake_at=now):
        return False
    await runs_sql.set_last_error(conn, run_id, None, now)
    detail = {"from": "paused", "to": "running", "control": control}
    await run_log.write(conn, run_id, "run.status", now, actor=actor, detail=detail)
    return True


class _Raced(Exception):
    """The run moved between our read and our write inside one transaction; roll back."""
