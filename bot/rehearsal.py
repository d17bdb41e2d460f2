"""Rehearse an event definition offline: the real engine on SQLite, a console instead of Discord.

A rehearsal publishes the definition to a throwaway database (or one named with ``--database``),
starts it as a rehearsal run (one per scope), and drives the very same ``Runner.tick`` the bot
drives, on a virtual clock: when nothing is due, the clock jumps to the next instant a run wants
(``Runner.next_wake``), so a ten-minute wait passes at once (or ``delta / speed`` real seconds
with ``--speed``). Cues are answered from the keyboard or automatically, through the same
``Controls.confirm`` / ``Controls.skip`` the Discord buttons call.

A rehearsal kept with ``--database`` that was interrupted (Ctrl-C, a crash, a pause, a cue left
unanswered) leaves its runs in flight, and a new rehearsal refuses that database. From the
command line it is then carried on (``resume_rehearsals``: paused runs resumed, the rest driven
to the end exactly as before) or cleared (``cancel_rehearsals``, through ``Controls.cancel``).

What players and GMs would see is printed by ``ConsoleDelivery``; what the runner did is read
back from the run log after each tick, so the rehearsal reports the engine's own account of the
run rather than a guess at it. Nothing here talks to Discord.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import mentions, validation_registry
from actions.delivery import Announcement, Cue, DeliveryError, Embed, Posted
from actions.mentions import Mentions, PingPolicy
from bot.config import Config
from bot.services import Services, assemble
from runner import catalog, views
from runner.clock import Clock, ManualClock, utcnow
from runner.controls import Controls
from runner.db import create_engine, masked_url
from runner.definitions import EventDefinition, load_file
from runner.engine import RunnerSettings
from runner.errors import DefinitionError, Problem
from runner.migrate import upgrade
from runner.schema import RUN_TERMINAL

CueMode = Literal["ask", "confirm", "skip"]
ACTOR = "rehearsal"
# Enough for an event of hundreds of steps with every retry; a rehearsal that needs more is
# going round in circles, and saying so beats hanging the terminal.
MAX_ITERATIONS = 20_000

# The rehearsal plays the event once, now. A look-ahead or look-back window would make the tick
# materialise the definition's cron occurrences into the rehearsal database as live runs, and the
# virtual clock would then play those too.
REHEARSAL_SETTINGS = RunnerSettings(lookahead_seconds=0, lookback_seconds=0)

Sleep = Callable[[float], Awaitable[Any]]


@dataclass(frozen=True)
class RehearsalOptions:
    # None when resuming the runs already in ``database_url``.
    file: Path | None
    cues: CueMode = "confirm"
    # Event seconds per real second; None passes waits instantly.
    speed: float | None = None
    scope: str | None = None
    # None: a temporary SQLite database, deleted afterwards.
    database_url: str | None = None
    as_json: bool = False
    max_iterations: int = MAX_ITERATIONS


# ── Output ──────────────────────────────────────────────────────────────────


def format_offset(seconds: float) -> str:
    """``+HH:MM:SS`` since the rehearsal began (hours go past 24 rather than wrapping)."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"+{hours:02d}:{minutes:02d}:{secs:02d}"


def format_duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


class Console:
    """Where rehearsal output goes: text lines stamped with the virtual time, or (``--json``)
    one JSON object per line. Every ``emit`` carries both forms, so the two never drift."""

    STAMP_WIDTH = len("[+00:00:00] ")

    def __init__(self, clock: Clock, *, as_json: bool, stream: TextIO | None = None) -> None:
        self.clock = clock
        self.start = clock.now()
        self.as_json = as_json
        self._stream = stream
        self._held: dict[int, list[Callable[[], None]]] = {}

    @property
    def stream(self) -> TextIO:
        # Looked up at each write, so a caller (or pytest's capsys) that swaps sys.stdout is obeyed.
        return self._stream or sys.stdout

    def elapsed(self, moment: dt.datetime | None = None) -> float:
        return ((moment or self.clock.now()) - self.start).total_seconds()

    def stamp(self, moment: dt.datetime | None = None) -> str:
        return f"[{format_offset(self.elapsed(moment))}]"

    def note(self, text: str) -> None:
        """An untimed line for people (headers, hints); JSON output leaves it out."""
        if not self.as_json:
            print(text, file=self.stream, flush=True)

    def emit(self, record_type: str, text: str, /, *more: str, **fields: Any) -> None:
        if self.as_json:
            now = self.clock.now()
            record = {
                "type": record_type,
                "at": now.isoformat(),
                "elapsed_seconds": self.elapsed(now),
                **fields,
            }
            print(json.dumps(record, default=str), file=self.stream, flush=True)
            return
        indent = " " * (self.STAMP_WIDTH + 2)
        lines = [f"{self.stamp()} {text}"] + [f"{indent}{line}" for line in more]
        print("\n".join(lines), file=self.stream, flush=True)

    def emit_for_step(self, step_id: int, record_type: str, text: str, /, *more: str, **fields: Any) -> None:
        """Like ``emit``, but held until ``release(step_id)``: a delivery happens inside the
        tick, and the run log says only afterwards how the step got there (the run started,
        the phase began), so the message is printed just before its step's outcome."""
        self._held.setdefault(step_id, []).append(lambda: self.emit(record_type, text, *more, **fields))

    def release(self, step_id: int | None = None) -> None:
        """Print what was held for ``step_id`` (for every step when None)."""
        ids = list(self._held) if step_id is None else [step_id]
        for each in ids:
            for show in self._held.pop(each, []):
                show()

    def problems(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            if self.as_json:
                self.emit(
                    "problem",
                    str(problem),
                    message=problem.message,
                    file=problem.file,
                    phase=problem.phase,
                    step=problem.step,
                    field=problem.field,
                )
            else:
                print(f"  {problem}", file=self.stream, flush=True)


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed, or not a real file
        return False


def run_label(run_id: int, scope: str) -> str:
    return f"run {run_id} {scope}" if scope else f"run {run_id}"


# ── The console delivery ────────────────────────────────────────────────────


class ConsoleDelivery:
    """``actions.delivery.Delivery`` that shows each message as its readers would see it.

    Announcements are shown as players see them (channel, text with the role mention in front,
    embed, who is pinged); cues as the GM sees them. Who is pinged is decided by the mention
    policy the Discord delivery applies (``actions.mentions``), for a live run: a rehearsal run
    in Discord goes to the sandbox channel with every ping suppressed, but here each message is
    shown where, and with the pings, the live event would post it. When the config names
    channels or roles it is a real server's, and a channel or ping role it lacks fails the step
    for good, as it would live; with neither configured (the quick start), any alias is
    accepted.
    """

    def __init__(self, console: Console, config: Config) -> None:
        self.console = console
        self.config = config
        self.sent: list[Announcement | Cue] = []
        self._posted: dict[str, Posted] = {}

    # ── the protocol ──

    async def announce(self, announcement: Announcement) -> Posted:
        return self._deliver(announcement)

    async def post_cue(self, cue: Cue) -> Posted:
        return self._deliver(cue)

    async def close_cue(self, run_id: int, step_id: int, posted: Posted, reason: str) -> None:
        self.console.emit_for_step(
            step_id,
            "delivery",
            f"{run_label(run_id, '')}: cue {posted.message_id} closed, its buttons disabled: {reason}",
            kind="cue_closed",
            run_id=run_id,
            step_id=step_id,
            reason=reason,
        )

    # ── what a real server would refuse ──

    @property
    def _strict(self) -> bool:
        return bool(self.config.channels)

    def _channel(self, request: Announcement | Cue) -> str | None:
        channel = (
            request.channel
            if isinstance(request, Announcement)
            else (request.channel or self.config.gm_channel)
        )
        return channel.lstrip("#") if channel else None

    def _problems(self, request: Announcement | Cue) -> list[str]:
        """What would make the bot refuse to post: a channel or a ping role the config does not
        have. ``validate`` and ``publish`` ask the same question (through ``check``) when a
        config is in effect, so what they accept is what this delivery posts."""
        problems = self._channel_problems(request)
        if self._decide(request).unknown_role is not None:
            known = ", ".join(sorted(self.config.roles)) or "none"
            problems.append(
                f"ping role {request.ping_role!r} is not one of the role aliases in config (roles: {known})"
            )
        return problems

    def _channel_problems(self, request: Announcement | Cue) -> list[str]:
        if not self._strict:
            return []
        channel = self._channel(request)
        if channel is None:
            return ["no GM channel: the step names none and gm_channel is not configured"]
        if self.config.channel_id(channel) is None:
            known = ", ".join(sorted(self.config.channels))
            return [f"channel {channel!r} is not one of the channel aliases in config (channels: {known})"]
        return []

    @property
    def ping_policy(self) -> PingPolicy:
        # A config naming channels or roles is a real server's; with neither (the quick start)
        # there is no server to hold an alias to.
        configured = self.config.roles or self.config.channels
        return PingPolicy(
            self.config.roles if configured else None,
            self.config.announce.allowed_ping_roles,
            self.config.announce.allow_everyone,
        )

    def _decide(self, request: Announcement | Cue) -> Mentions:
        # Shown as live: the sandbox's suppression is Discord's, not the event's.
        return mentions.for_request(self.ping_policy, request)

    async def check(self, request: Announcement | Cue) -> list[str]:
        return self._problems(request)

    # ── showing ──

    def _deliver(self, request: Announcement | Cue) -> Posted:
        problems = self._problems(request)
        if problems:
            raise DeliveryError("; ".join(problems), transient=False)
        label = self._run_label(request)
        existing = self._posted.get(request.idempotency_key)
        if existing is not None:
            # A retried step carries the same key; Discord refuses the second copy, and so do we.
            self.console.emit_for_step(
                request.step_id,
                "delivery",
                f"{label}: not posted again (same idempotency key as message {existing.message_id})",
                kind="duplicate",
                run_id=request.run_id,
                step_id=request.step_id,
            )
            return existing
        channel = self._channel(request)
        channel_id = self.config.channel_id(channel) if channel else None
        posted = Posted(
            channel_id=str(channel_id or channel or "gm"),
            message_id=f"console-{len(self.sent) + 1}",
            channel_name=channel,
        )
        self.sent.append(request)
        self._posted[request.idempotency_key] = posted
        if isinstance(request, Announcement):
            self._show_announcement(request, label, channel)
        else:
            self._show_cue(request, label, channel)
        return posted

    def _run_label(self, request: Announcement | Cue) -> str:
        scope = request.context.scope if request.context else ""
        return run_label(request.run_id, scope)

    @staticmethod
    def _where(channel: str | None) -> str:
        return f"#{channel}" if channel else "the GM channel"

    @staticmethod
    def _ping_text(decision: Mentions) -> str:
        text = f"pings {', '.join(decision.pinged)}" if decision.pinged else "no ping"
        if decision.inert:
            text += f"; {', '.join(decision.inert)} shown but inert (pings nobody)"
        return text

    def _show_announcement(self, a: Announcement, label: str, channel: str | None) -> None:
        decision = self._decide(a)
        body: list[str] = []
        text = decision.text(markup=False)
        if a.content is not None or text is not None:
            body.extend((text or "").splitlines() or [""])
        if a.embed is not None:
            body.extend(_embed_lines(a.embed))
        self.console.emit_for_step(
            a.step_id,
            "delivery",
            f"{label}: announcement in {self._where(channel)}, {self._ping_text(decision)}",
            *body,
            kind="announce",
            run_id=a.run_id,
            step_id=a.step_id,
            scope=a.context.scope if a.context else None,
            channel=channel,
            content=a.content,
            embed=_embed_record(a.embed),
            pings=list(decision.pinged),
            inert_mentions=list(decision.inert),
        )

    def _show_cue(self, c: Cue, label: str, channel: str | None) -> None:
        decision = self._decide(c)
        body = [f"│ {c.title}", *(f"│ {line}" for line in c.instructions.splitlines())]
        if c.context is not None:
            where = [
                c.context.event_title,
                c.context.phase_label,
                c.context.scope,
                "rehearsal" if c.context.rehearsal else "",
            ]
            body.append("│ " + " · ".join(part for part in where if part))
        body.append("[ Confirm ]  [ Skip ]")
        self.console.emit_for_step(
            c.step_id,
            "delivery",
            f"{label}: GM cue in {self._where(channel)}, {self._ping_text(decision)}",
            *body,
            kind="cue",
            run_id=c.run_id,
            step_id=c.step_id,
            scope=c.context.scope if c.context else None,
            channel=channel,
            title=c.title,
            instructions=c.instructions,
            pings=list(decision.pinged),
        )


def _embed_lines(embed: Embed) -> list[str]:
    lines: list[str] = []
    if embed.title:
        lines.append(f"┃ {embed.title}")
    if embed.description:
        lines.extend(f"┃ {line}" for line in embed.description.splitlines())
    for item in embed.fields:
        value_lines = item.value.splitlines() or [""]
        lines.append(f"┃ {item.name}: {value_lines[0]}")
        lines.extend(f"┃   {line}" for line in value_lines[1:])
    if embed.image_url:
        lines.append(f"┃ [image] {embed.image_url}")
    if embed.footer:
        lines.append(f"┃ — {embed.footer}")
    return lines


def _embed_record(embed: Embed | None) -> dict[str, Any] | None:
    if embed is None:
        return None
    return {
        "title": embed.title,
        "description": embed.description,
        "colour": embed.colour,
        "image": embed.image_url,
        "footer": embed.footer,
        "fields": [{"name": f.name, "value": f.value, "inline": f.inline} for f in embed.fields],
    }


# ── The driver ──────────────────────────────────────────────────────────────


class _Stop(Exception):
    """End the rehearsal early; the message says why."""


class Rehearsal:
    """One rehearsal of one definition. ``run()`` answers the exit code: 0 only when every run
    completed."""

    def __init__(
        self,
        services: Services,
        definition: EventDefinition | None,
        options: RehearsalOptions,
        console: Console,
        *,
        clock: ManualClock,
        tick_interval_seconds: float,
        sleep: Sleep,
    ) -> None:
        self.services = services
        self.definition = definition
        self.options = options
        self.console = console
        self.clock = clock
        self.tick_interval_seconds = tick_interval_seconds
        self.sleep = sleep
        self.run_ids: list[int] = []
        self._last_log_id: dict[int, int] = {}
        self._views: dict[int, views.RunView] = {}

    async def run(self) -> int:
        services = self.services
        assert self.definition is not None, "a new rehearsal plays a definition"
        published = await catalog.publish(
            services.engine,
            self.definition,
            self.clock.now(),
            source=str(self.options.file),
            actor=ACTOR,
        )
        started = await services.controls.start(
            self.definition.key, scope=self.options.scope, actor=ACTOR, rehearsal=True
        )
        if not started.ok:
            self.console.emit(
                "error", f"cannot start the rehearsal: {started.message}", message=started.message
            )
            return 1
        self.run_ids = list(started.run_ids)
        verb = "published" if published.changed else "already published as"
        self.console.note(
            f"{verb} {published.key} v{published.version}; {started.message}; "
            f"cues: {self.options.cues}; waits: {self._pace()}"
        )
        self.console.note("")
        await self._refresh()
        try:
            await self._drive()
        except _Stop as stop:
            self.console.emit("error", f"rehearsal stopped: {stop}", message=str(stop))
        return await self._finish()

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
            if run.status == "paused":
                result = await self.services.controls.resume(run.id, actor=ACTOR)
                if not result.ok:
                    self.console.emit("error", result.message, message=result.message, run_id=run.id)
        await self._refresh()
        try:
            await self._drive()
        except _Stop as stop:
            self.console.emit("error", f"rehearsal stopped: {stop}", message=str(stop))
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
            paused = [view for view in current if view.status == "paused"]
            if paused:
                view = paused[0]
                raise _Stop(
                    f"{run_label(view.id, view.scope)} is paused: {view.last_error or 'a step failed'}. "
                    "A live run would wait here for staff to retry, resume or cancel it."
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
            blocked = any(view.status == "scheduled" and view.scheduled_for <= now for view in current)
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
            if step.status == "pending" and step.due_at is not None and step.due_at > now
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
        controls = self.services.controls
        if choice == "confirm":
            result = await controls.confirm(step.id, actor=ACTOR)
        else:
            result = await controls.skip(step.id, actor=ACTOR)
        if not result.ok:
            self.console.emit(
                "error", f"{run_label(view.id, view.scope)}: {result.message}", message=result.message
            )

    async def _ask(self, view: views.RunView, step: views.StepView) -> CueMode:
        prompt = f"GM for {run_label(view.id, view.scope)}, cue {step.label!r}: [c]onfirm, [s]kip or [q]uit? "
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
            if answer in ("c", "confirm"):
                return "confirm"
            if answer in ("s", "skip"):
                return "skip"
            if answer in ("q", "quit"):
                raise _Stop("stopped at a cue, as asked")

    # ── reading the engine's account back ──

    async def _refresh(self) -> None:
        """Re-read each run, then print the run-log lines written since the last look, in the
        order they were written."""
        engine = self.services.engine
        fresh: list[tuple[int, dict[str, Any]]] = []
        for run_id in self.run_ids:
            view = await views.run_view(engine, run_id, self.services.versions)
            assert view is not None
            self._views[run_id] = view
            last = self._last_log_id.get(run_id, 0)
            for line in await views.log_for_run(engine, run_id):
                if int(line["id"]) > last:
                    fresh.append((run_id, line))
                    self._last_log_id[run_id] = int(line["id"])
        for run_id, line in sorted(fresh, key=lambda item: int(item[1]["id"])):
            if line["step_id"] is not None:
                self.console.release(int(line["step_id"]))
            self._show_line(self._views[run_id], line)
        self.console.release()

    def _show_line(self, view: views.RunView, line: dict[str, Any]) -> None:
        kind = line["kind"]
        detail = line["detail"] or {}
        label = run_label(view.id, view.scope)
        base = {"event": kind, "run_id": view.id, "scope": view.scope, "actor": line["actor"]}
        if kind.startswith("step."):
            self._show_step_line(view, line, detail, label, base)
        elif kind == "run.created":
            mode = "rehearsal run" if detail.get("rehearsal") else "LIVE run"
            self.console.emit(
                "status",
                f"{label}: created ({mode})",
                **base,
                to="scheduled",
                rehearsal=detail.get("rehearsal"),
            )
        elif kind == "run.status":
            before, after = detail.get("from"), detail.get("to")
            why = detail.get("error") or detail.get("reason") or detail.get("control")
            moved = f"{before} → {after}" if before else f"now {after}"
            text = f"{label}: {moved}" + (f" ({why})" if why else "")
            self.console.emit(
                "status",
                text,
                **base,
                **{"from": before, "to": after},
                reason=detail.get("reason"),
                error=detail.get("error"),
            )
        elif kind in ("phase.started", "phase.completed"):
            key = detail.get("phase")
            phase = next((p for p in view.phases if p.key == key), None)
            title = f" ({phase.label})" if phase else ""
            verb = "started" if kind == "phase.started" else "completed"
            self.console.emit("phase", f"{label}: phase {key!r}{title} {verb}", **base, phase=key)
        elif kind == "run.blocked":
            text = f"{label}: waiting, concurrency key {detail.get('key')!r} is held by run {detail.get('holder_run_id')}"
            self.console.emit(
                "status", text, **base, blocked_by=detail.get("holder_run_id"), key=detail.get("key")
            )
        elif kind == "run.degraded":
            text = f"{label}: health → degraded ({detail.get('reason')})"
            self.console.emit("status", text, **base, health="degraded", reason=detail.get("reason"))
        else:
            self.console.emit(
                "status", f"{label}: {kind} {json.dumps(detail, default=str)}", **base, detail=detail
            )

    def _show_step_line(
        self,
        view: views.RunView,
        line: dict[str, Any],
        detail: dict[str, Any],
        label: str,
        base: dict[str, Any],
    ) -> None:
        kind = line["kind"]
        outcome = kind.removeprefix("step.")
        step = next((s for p in view.phases for s in p.steps if s.id == line["step_id"]), None)
        name = f"{step.phase} step {step.seq} ({step.label})" if step else f"step {line['step_id']}"
        record = {
            **base,
            "outcome": outcome,
            "step_id": line["step_id"],
            "phase": step.phase if step else None,
            "index": step.seq if step else None,
            "label": step.label if step else None,
            "action": step.action_id if step else detail.get("action"),
            "attempts": detail.get("attempts"),
            "error": detail.get("error"),
        }
        text = f"{label}: {name} {outcome}"
        if outcome == "done" and detail.get("hold_until"):
            until = dt.datetime.fromisoformat(detail["hold_until"])
            held = (until - line["at"]).total_seconds()
            text += f"; what comes next waits {format_duration(held)} (until {format_offset(self.console.elapsed(until))})"
            record["hold_until"] = detail["hold_until"]
        elif outcome == "parked":
            text = f"{label}: {name} is waiting for a GM to confirm or skip"
        elif outcome == "retry":
            due = dt.datetime.fromisoformat(detail["due_at"]) if detail.get("due_at") else None
            when = f"; retrying at {format_offset(self.console.elapsed(due))}" if due else ""
            text = f"{label}: {name} failed (attempt {detail.get('attempts')}): {detail.get('error')}{when}"
            record["due_at"] = detail.get("due_at")
        elif outcome == "failed":
            text = f"{label}: {name} FAILED: {detail.get('error')}"
        elif outcome in ("confirmed", "skipped") and line["actor"]:
            text += f" by {line['actor']}"
        self.console.emit("step", text, **record)

    async def _finish(self) -> int:
        await self._refresh()
        completed = 0
        self.console.note("")
        for run_id in self.run_ids:
            view = self._views[run_id]
            done = view.status == "completed"
            completed += done
            text = f"{run_label(view.id, view.scope)}: {view.status} (health {view.health})"
            if not done and view.last_error:
                text += f": {view.last_error}"
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
        if total and completed == total:
            self.console.note(f"rehearsal completed: {completed} of {total} runs completed")
            return 0
        self.console.note(f"rehearsal did not complete: {completed} of {total} runs completed")
        return 1


async def rehearse(
    options: RehearsalOptions,
    config: Config,
    *,
    stream: TextIO | None = None,
    sleep: Sleep = asyncio.sleep,
) -> int:
    """Validate, publish, start and play ``options.file``; the exit code is 0 only when every
    run completed."""
    assert options.file is not None, "resume_rehearsals carries on without a file"
    clock = ManualClock(utcnow().replace(microsecond=0))
    console = Console(clock, as_json=options.as_json, stream=stream)
    try:
        definition = load_file(options.file, validation_registry())
    except DefinitionError as exc:
        console.note(f"{options.file} is not a valid event definition:")
        console.problems(exc.problems)
        return 1
    scopes = definition.run_scopes() if options.scope is None else [options.scope]
    where = f"in {len(scopes)} scopes ({', '.join(scopes)})" if any(scopes) else "with no scope"
    console.note(f'Rehearsing "{definition.title}" ({definition.key}) from {options.file} {where}.')
    console.note("Nothing is sent to Discord: messages are shown here as players and GMs would see them.")
    with tempfile.TemporaryDirectory(prefix="eventbot-rehearsal-") as scratch:
        url = options.database_url or f"sqlite+aiosqlite:///{Path(scratch) / 'rehearsal.sqlite3'}"
        engine = create_engine(url)
        try:
            await upgrade(engine)
            if options.database_url and not await _database_is_idle(engine, console, url):
                return 1
            delivery = ConsoleDelivery(console, config)
            services = assemble(
                engine,
                lambda _describe: delivery,
                clock=clock,
                settings=REHEARSAL_SETTINGS,
                owner=ACTOR,
            )
            rehearsal = Rehearsal(
                services,
                definition,
                options,
                console,
                clock=clock,
                tick_interval_seconds=config.tick_interval_seconds,
                sleep=sleep,
            )
            return await rehearsal.run()
        finally:
            await engine.dispose()


# Who the run history says cancelled a leftover rehearsal run ("cancelled by rehearse --cancel").
CANCEL_ACTOR = "rehearse --cancel"
# Every run in flight in one database, however many: a rehearsal ticks them all.
IN_FLIGHT_LIMIT = 1_000_000


async def _database_is_idle(engine: AsyncEngine, console: Console, url: str) -> bool:
    """A rehearsal ticks every due run in its database; in one that holds runs in flight (the
    live bot's, or an interrupted rehearsal's) it would play those too, on the virtual clock."""
    busy = await views.list_runs(engine, in_flight_only=True, limit=IN_FLIGHT_LIMIT)
    if not busy:
        return True
    shown = masked_url(url)
    message = (
        f"{shown} has {len(busy)} run(s) in flight; a rehearsal would advance them too. "
        "Rehearse on a database of its own (or leave out --database for a temporary one)."
    )
    if all(run.rehearsal for run in busy):
        message += (
            " They are all rehearsal runs: `rehearse --database URL --resume` carries them on, "
            "`rehearse --database URL --cancel REASON` cancels them."
        )
    console.emit("error", message, message=message)
    return False


async def resume_rehearsals(
    options: RehearsalOptions,
    config: Config,
    *,
    stream: TextIO | None = None,
    sleep: Sleep = asyncio.sleep,
) -> int:
    """Carry on the rehearsal runs in flight in ``options.database_url`` (``rehearse --database
    URL --resume``); 0 only when every one of them completed. Refused, changing nothing, when
    the database has a live run in flight: the tick would advance it too."""
    assert options.database_url is not None, "only a kept database has runs to resume"
    url = options.database_url
    engine = create_engine(url)
    try:
        await upgrade(engine)
        busy = await views.list_runs(engine, in_flight_only=True, limit=IN_FLIGHT_LIMIT)
        last_log_ids: dict[int, int] = {}
        start = utcnow().replace(microsecond=0)
        for run in busy:
            for line in await views.log_for_run(engine, run.id):
                last_log_ids[run.id] = max(last_log_ids.get(run.id, 0), int(line["id"]))
                start = max(start, line["at"])
        # The interrupted rehearsal's virtual clock may have run days ahead of real time: carry
        # on from where it got to, so the runs' history never goes back in time.
        clock = ManualClock(start)
        console = Console(clock, as_json=options.as_json, stream=stream)
        live = [run for run in busy if not run.rehearsal]
        if live:
            message = (
                f"{masked_url(url)} has {len(live)} live run(s) in flight; carrying on its rehearsals "
                "would advance them too. Never point rehearse at the live bot's database."
            )
            console.emit("error", message, message=message)
            return 1
        if not busy:
            console.note(f"{masked_url(url)} has no rehearsal runs in flight: nothing to resume")
            return 0
        services = assemble(
            engine,
            lambda _describe: ConsoleDelivery(console, config),
            clock=clock,
            settings=REHEARSAL_SETTINGS,
            owner=ACTOR,
        )
        rehearsal = Rehearsal(
            services,
            None,
            options,
            console,
            clock=clock,
            tick_interval_seconds=config.tick_interval_seconds,
            sleep=sleep,
        )
        return await rehearsal.carry_on(sorted(busy, key=lambda run: run.id), last_log_ids)
    finally:
        await engine.dispose()


async def cancel_rehearsals(
    engine: AsyncEngine, reason: str, *, as_json: bool = False, stream: TextIO | None = None
) -> int:
    """Cancel every rehearsal run in flight in ``engine``'s database through ``Controls.cancel``
    (``rehearse --database URL --cancel REASON``), with ``reason`` in each run's history; live
    runs are left alone. 0 when every one was cancelled (or there were none)."""
    clock = ManualClock(utcnow())
    console = Console(clock, as_json=as_json, stream=stream)
    busy = await views.list_runs(engine, in_flight_only=True, limit=IN_FLIGHT_LIMIT)
    rehearsals = sorted((run for run in busy if run.rehearsal), key=lambda run: run.id)
    if not rehearsals:
        console.note("no rehearsal runs in flight: nothing to cancel")
    controls = Controls(engine, clock=clock)
    failed = 0
    for run in rehearsals:
        result = await controls.cancel(run.id, reason=reason, actor=CANCEL_ACTOR)
        failed += not result.ok
        console.emit(
            "status" if result.ok else "error",
            f"{run_label(run.id, run.scope)}: {'cancelled' if result.ok else result.message}",
            run_id=run.id,
            scope=run.scope,
            to="cancelled" if result.ok else None,
            message=result.message,
        )
    if len(busy) > len(rehearsals):
        console.note(f"left {len(busy) - len(rehearsals)} live run(s) alone")
    return 1 if failed else 0
