"""One rehearsal of one definition (or of the runs an interrupted one left): drive the real
``Runner.tick`` on a virtual clock, answer cues, and report each run's end."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bridge.listings import Desired, desired_state
from rehearsal import reminders, transcript
from rehearsal import signups as rehearsal_signups
from rehearsal.answers import answer_parked
from rehearsal.console import Console, format_duration, is_terminal, run_label
from rehearsal.delivery import ConsoleDelivery
from runner import catalog, views
from runner.approvals import asks_approval
from runner.clock import ManualClock
from runner.definitions import EventDefinition
from runner.engine import RunnerSettings
from runner.history import Actor, Entry, RunCreated, RunStatusChanged
from runner.schema import RUN_TERMINAL
from runner.states import Control, RunStatus, StepStatus
from wiring.control_text import control_text
from wiring.run_text import failed_step, last_error_text
from wiring.services import Services

# How GM cues are answered: asked at the keyboard, or one cue control pressed on every cue.
CueMode = Literal["ask", Control.CONFIRM, Control.SKIP]
ACTOR = Actor(None, "rehearsal")
# Enough for an event of hundreds of steps with every retry; a rehearsal that needs more is
# going round in circles, and saying so beats hanging the terminal.
MAX_ITERATIONS = 20_000

# The rehearsal plays the event once, now. A look-ahead or look-back window would make the tick
# materialise the definition's cron occurrences into the rehearsal database as live runs, and the
# virtual clock would then play those too.
# A step whose action is destructive waits for an approval, as under the config's default.
REHEARSAL_SETTINGS = RunnerSettings(lookahead_seconds=0, lookback_seconds=0, approve_from="destructive")

Sleep = Callable[[float], Awaitable[Any]]


def lead_before_start(definition: EventDefinition, options: RehearsalOptions) -> dt.timedelta:
    """How long before the start the rehearsal begins: its first reminder, or the sign-up
    message's posting when ``--signups`` is rehearsed."""
    lead = dt.timedelta(seconds=definition.longest_reminder_lead())
    return max(lead, rehearsal_signups.opening_lead(definition)) if options.signups else lead


@dataclass(frozen=True)
class RehearsalOptions:
    # None when resuming the runs already in ``database_url``.
    file: Path | None
    cues: CueMode = Control.CONFIRM
    # Event seconds per real second; None passes waits instantly.
    speed: float | None = None
    scope: str | None = None
    # None: a temporary SQLite database, deleted afterwards.
    database_url: str | None = None
    as_json: bool = False
    max_iterations: int = MAX_ITERATIONS
    # ``-v``: the engine's bookkeeping too (status transitions, steps done, phases closing).
    verbose: bool = False
    # Which config the aliases are checked against (``cli.definitions.config_line``): the
    # first line of the text.
    config_line: str | None = None
    # ``--signups``: how many simulated members click, or their choices (``rehearsal.signups``).
    signups: str | None = None


# What an answer the cue prompt does not know is told, before the prompt comes again.
CUE_KEYS = "press c to confirm, s to skip, or q to quit the rehearsal"


class _Stop(Exception):
    """End the rehearsal early; the message says why."""


class Rehearsal:
    """One rehearsal of one definition. ``run()`` answers the exit code: 0 only when every run
    completed."""

    def __init__(
        self,
        services: Services[ConsoleDelivery],
        definition: EventDefinition | None,
        options: RehearsalOptions,
        console: Console,
        *,
        clock: ManualClock,
        tick_interval_seconds: float,
        sleep: Sleep,
        mirror_by_default: bool = False,
    ) -> None:
        self.services = services
        self.definition = definition
        self.options = options
        self.console = console
        self.clock = clock
        self.tick_interval_seconds = tick_interval_seconds
        self.sleep = sleep
        # The config's ``discord_events.mirror``: what the live bot would list is shown.
        self.mirror_by_default = mirror_by_default
        self.run_ids: list[int] = []
        self._last_log_id: dict[int, int] = {}
        self._views: dict[int, views.RunView] = {}
        self._waits = transcript.WaitsBeforePhases(console)
        # "<reminder> (<scope>): <why>" for each reminder that could not be sent (``remind``).
        self.failed_reminders: list[str] = []

    async def run(self) -> int:
        """Publish, send the reminders at their times before the start (the clock begins at
        the first of them: ``rehearse`` sets it so), start and play to the end."""
        services = self.services
        definition = self.definition
        assert definition is not None, "a new rehearsal plays a definition"
        starts_at = self.clock.now() + lead_before_start(definition, self.options)
        published = await catalog.publish(
            services.engine,
            definition,
            self.clock.now(),
            source=str(self.options.file),
            actor=ACTOR,
        )
        verb = "published" if published.changed else "already published as"
        version = f"{verb} {published.key} v{published.version}"
        scopes = self._reminded_scopes()
        booked = None
        if self.options.signups:
            self.console.note(f"{version}; the run is booked for its start, as the schedule books one:")
            choices = rehearsal_signups.simulated_choices(self.options.signups, definition)
            booked = await rehearsal_signups.book_and_click(self, starts_at, choices)
        if scopes:
            self.console.note(
                f"{version}; its reminders first, each at its time before the start (+00:00:00):"
            )
            await reminders.remind(self, scopes, starts_at)
            await self._pass_time(self.clock.now(), starts_at)
            self.console.note("")
        else:
            # Nothing to send before the start (a scope the event lacks): start at +00:00:00.
            self.clock.set(starts_at)
        if booked is not None:
            self.run_ids = booked
            said = f"run {', '.join(map(str, booked))} starts at its time (booked, not started by hand)"
        else:
            started = await services.controls.start(
                definition.key, scope=self.options.scope, actor=ACTOR, rehearsal=True
            )
            said = control_text(started)
            if not started.ok:
                self.console.emit("error", f"cannot start the rehearsal: {said}", message=said)
                return 1
            self.run_ids = list(started.run_ids)
        self.console.note(
            f"{'' if scopes or booked else f'{version}; '}{said}; cues: {self.options.cues}; waits: {self._pace()}"
        )
        self.console.note("")
        return await self._drive_to_the_end()

    def _reminded_scopes(self) -> list[str]:
        """The scopes whose reminders are sent: every scope rehearsed (none for a scope the
        event lacks: the start refuses it, in its own words)."""
        assert self.definition is not None
        if not self.definition.reminders:
            return []
        known = self.definition.run_scopes()
        if self.options.scope is None:
            return known
        return [self.options.scope] if self.options.scope in known else []

    async def carry_on(self, runs: list[views.RunSummary], last_log_ids: dict[int, int]) -> int:
        """Drive runs an interrupted rehearsal left in flight to their end, as ``run`` would
        have: a paused run is resumed first (``/event resume``: past its failed step), and only
        what happens after ``last_log_ids`` is printed."""
        self.run_ids = [run.id for run in runs]
        self._last_log_id.update(last_log_ids)
        self.console.note(
            f"carrying on {len(runs)} rehearsal run(s): "
            f"{', '.join(run_label(run.id, run.scope) for run in runs)}; "
            f"cues: {self.options.cues}; waits: {self._pace()}"
        )
        self.console.note("")
        for run in runs:
            if run.status == RunStatus.PAUSED:
                result = await self.services.controls.resume(run.id, actor=ACTOR)
                if not result.ok:
                    said = control_text(result)
                    self.console.emit("error", said, message=said, run_id=run.id)
        return await self._drive_to_the_end()

    async def _drive_to_the_end(self) -> int:
        await self._refresh()
        try:
            await self._drive()
        except _Stop as stop:
            self.console.emit("error", f"rehearsal stopped: {stop}", message=str(stop))
        if self.options.signups:
            await rehearsal_signups.take_attendance(self)
        return await self._finish()

    def _pace(self) -> str:
        if self.options.speed:
            return f"{self.options.speed:g}x faster than real time"
        return "instant (virtual clock)"

    async def _drive(self) -> None:
        runner = self.services.runner
        for _ in range(self.options.max_iterations):
            report = await runner.tick()
            await self._refresh()
            current = [self._views[run_id] for run_id in self.run_ids]
            if all(view.status in RUN_TERMINAL for view in current):
                return
            paused = [view for view in current if view.status == RunStatus.PAUSED]
            if paused:
                raise _Stop(
                    f"{_paused_where(paused[0])}. A live run would wait here for staff to retry, "
                    "resume or cancel it."
                )
            parked = [(view, step) for view in current for step in view.open_steps() if step.parked]
            if parked:
                for view, step in parked:
                    await self._answer(view, step)
                await self._refresh()
                continue
            now = self.clock.now()
            wake = await runner.next_wake()
            if wake is None:
                raise _Stop("no run is due and no cue is waiting, yet not every run has ended")
            if wake <= now and (report.runs_advanced or report.steps_dispatched):
                continue
            blocked = any(
                view.status == RunStatus.SCHEDULED and view.scheduled_for <= now for view in current
            )
            if blocked:
                # A run waiting on a concurrency key only rechecks now and then; nothing changes
                # for it until its holder moves on, so skip straight to the holder's next step.
                wake = self._next_step_due(now) or wake
            if wake <= now:
                wake = now + dt.timedelta(seconds=self.tick_interval_seconds)
            await self._pass_time(now, wake)
        raise _Stop(f"gave up after {self.options.max_iterations} ticks without every run ending")

    def _next_step_due(self, now: dt.datetime) -> dt.datetime | None:
        due = [
            step.due_at
            for view in self._views.values()
            for step in view.open_steps()
            if step.status == StepStatus.PENDING and step.due_at is not None and step.due_at > now
        ]
        return min(due, default=None)

    async def _pass_time(self, now: dt.datetime, until: dt.datetime) -> None:
        seconds = (until - now).total_seconds()
        if self.options.speed:
            real = seconds / self.options.speed
            if real >= 1:
                self.console.note(
                    f"{' ' * Console.STAMP_WIDTH}… {format_duration(seconds)} of event time "
                    f"passes in {real:.1f} s"
                )
            await self.sleep(real)
        self.clock.set(until)

    async def _answer(self, view: views.RunView, step: views.StepView) -> None:
        assert step.id is not None
        choice = self.options.cues
        if choice == "ask":
            choice = await self._ask(view, step)
        result = await answer_parked(self.services.controls, step, choice, ACTOR)
        if not result.ok:
            said = control_text(result)
            self.console.emit("error", f"{run_label(view.id, view.scope)}: {said}", message=said)

    async def _ask(self, view: views.RunView, step: views.StepView) -> CueMode:
        cue = views.step_name(step.id, step.label)
        prompt = f"GM for {run_label(view.id, view.scope)}, cue {cue}: [c]onfirm, [s]kip or [q]uit? "
        if asks_approval(step.result):
            # Staff answer a risky step's card, not a GM: confirm is its Approve.
            prompt = (
                f"Staff for {run_label(view.id, view.scope)}, approve {cue}: [c]onfirm, [s]kip or [q]uit? "
            )
        # Prompts go to stderr under --json, so stdout stays one JSON object per line.
        out = sys.stderr if self.console.as_json else self.console.stream
        while True:
            out.write(prompt)
            out.flush()
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:
                out.write("\n")
                raise _Stop("stopped at a cue: the input ended before anyone answered")
            answer = line.strip().lower()
            if not is_terminal(sys.stdin):
                # Answers piped in are not echoed by a terminal; echo them so the transcript reads.
                out.write(f"{answer}\n")
            if answer in ("c", Control.CONFIRM):
                return Control.CONFIRM
            if answer in ("s", Control.SKIP):
                return Control.SKIP
            if answer in ("q", "quit"):
                raise _Stop("stopped at a cue, as asked")
            out.write(f"{answer!r} is not an answer here: {CUE_KEYS}\n" if answer else f"{CUE_KEYS}\n")

    # ── reading the engine's account back ──

    async def _refresh(self) -> None:
        """Re-read each run, then print the run-log lines written since the last look, in the
        order they were written."""
        engine = self.services.engine
        fresh: list[tuple[int, Entry]] = []
        for run_id in self.run_ids:
            view = await views.run_view(engine, run_id, self.services.versions)
            assert view is not None
            self._views[run_id] = view
            last = self._last_log_id.get(run_id, 0)
            for entry in await views.log_for_run(engine, run_id):
                if entry.id > last:
                    fresh.append((run_id, entry))
                    self._last_log_id[run_id] = entry.id
        # A wait that has passed by now lets its phase end before anything newer is shown.
        self._waits.release_due()
        for run_id, entry in sorted(fresh, key=lambda item: item[1].id):
            view = self._views[run_id]
            held = self._waits.hold(view, entry)
            if entry.step_id is not None:
                self.console.release(entry.step_id)
            if not held:
                transcript.show_line(self.console, view, entry)
            if isinstance(entry.event, RunCreated | RunStatusChanged):
                listing = await self._listing(run_id)
                transcript.show_listing(self.console, self._views[run_id], entry, listing)
        self.console.release()

    async def _listing(self, run_id: int) -> Desired | None:
        """The Events-tab entry the live bot would keep for this run (None: not mirrored)."""
        view = self._views[run_id]
        if view.unreadable:
            return None
        async with self.services.engine.connect() as conn:
            definition = await self.services.versions.get(conn, view.version_id)
        if definition.discord_event_settings(self.mirror_by_default) is None:
            return None
        return desired_state(
            run_id,
            definition,
            scope=view.scope,
            status=view.status,
            scheduled_for=view.scheduled_for,
            mirror_by_default=self.mirror_by_default,
        )

    async def _finish(self) -> int:
        await self._refresh()
        completed = 0
        self.console.note("")
        for run_id in self.run_ids:
            view = self._views[run_id]
            done = view.status == RunStatus.COMPLETED
            completed += done
            text = f"{run_label(view.id, view.scope)}: {view.status} (health {view.health})"
            said = last_error_text(view)
            if not done and said:
                text += f": {said}"
            self.console.emit(
                "final",
                text,
                run_id=view.id,
                scope=view.scope,
                status=view.status,
                health=view.health,
                rehearsal=view.rehearsal,
                completed=done,
                last_error=view.last_error,
            )
        total = len(self.run_ids)
        if self.failed_reminders:
            self.console.note(
                f"{len(self.failed_reminders)} reminder(s) failed (shown above): "
                "a live occurrence would not send them"
            )
        if total and completed == total and not self.failed_reminders:
            self.console.note(f"rehearsal completed: {completed} of {total} runs completed")
            return 0
        self.console.note(f"rehearsal did not complete: {completed} of {total} runs completed")
        return 1


def _paused_where(view: views.RunView) -> str:
    """``run 1 is paused at step 5 (Open the gates), which failed``: the step named as its own
    line named it just before, not as the engine's error words it."""
    where = run_label(view.id, view.scope)
    step = failed_step(view)
    if step is not None:
        return f"{where} is paused at {views.step_name(step.id, step.label)}, which failed"
    return f"{where} is paused: {view.last_error or 'a step failed'}"
