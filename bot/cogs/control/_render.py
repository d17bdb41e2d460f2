"""What ``/event`` shows staff: the status embed, the list of events and runs, the upcoming
occurrences and preflight problems, from the runner's views (``runner.views``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import assert_never

import discord

from actions import limits
from bot.rendering import (
    REHEARSAL_MARK,
    clip,
    fit,
    fit_list,
    person,
    status_colour,
    step_icon,
    timestamp,
)
from runner.approvals import asks_approval
from runner.errors import Problem
from runner.schedule import Upcoming
from runner.states import CleanupStatus, Health, RunStatus, StepStatus
from runner.views import DefinitionSummary, ReminderView, RunSummary, RunView, StepView, UpcomingEvent
from runner.views.cleanup import cleanup_line
from wiring.run_text import last_error_text, pruned_text


def _step_line(step: StepView) -> str:
    icon = step_icon(step)
    ident = f"`{step.id}`" if step.id is not None else "`–`"
    words = (
        ("waiting for staff approval" if asks_approval(step.result) else "waiting for a GM")
        if step.parked
        else step.status
    )
    line = f"{icon} {ident} {clip(step.label, 80)} — {words}"
    if step.status == StepStatus.PENDING and step.due_at is not None:
        line += f", due {timestamp(step.due_at)}"
    if step.settled_by and step.status in (StepStatus.DONE, StepStatus.SKIPPED):
        line += f" by {person(step.settled_by)}"
    if step.attempts > 1:
        line += f" (attempt {step.attempts})"
    if step.last_error and step.status in (StepStatus.FAILED, StepStatus.PENDING):
        line += f"\n  ↳ {clip(step.last_error, 160)}"
    return line


def _field_value(lines: Sequence[str], size: int = limits.EMBED_FIELD_VALUE_MAX) -> str:
    """Lines joined within ``size`` characters; what does not fit is counted, not cut mid-line."""
    if not lines:
        return "—"
    return fit_list("", lines, size, sep="\n", item_max=size - 24)


def reminder_words(status: StepStatus | str) -> str:
    """What became of a reminder (a step of its own) in ``status``."""
    status = StepStatus(status)
    match status:
        case StepStatus.PENDING:
            return "to be sent"
        case StepStatus.RUNNING:
            return "being sent"
        case StepStatus.DONE:
            return "sent"
        case StepStatus.SKIPPED:
            return "not sent"
        case StepStatus.FAILED:
            return "could not be sent"
        case StepStatus.CANCELLED:
            return "cancelled with the run"
        case _:
            assert_never(status)


def _reminder_line(reminder: ReminderView) -> str:
    words = reminder_words(reminder.status)
    when = f" {timestamp(reminder.due_at, 'f')}" if reminder.due_at is not None else ""
    line = f"🔔 {clip(reminder.label, 80)}{when} — {words}"
    reason = reminder.last_error or reminder.note
    if reason and reminder.status in (StepStatus.SKIPPED, StepStatus.FAILED):
        line += f"\n  ↳ {clip(reason, 160)}"
    return line


def status_embed(run: RunView, reminders: Sequence[ReminderView] = ()) -> discord.Embed:
    """A run's phases and steps with their states, due times as Discord timestamps, its
    reminders, the last error and health; always within Discord's embed limits."""
    title = clip(
        f"{REHEARSAL_MARK + ' ' if run.rehearsal else ''}{run.title}"
        f"{' — ' + run.scope if run.scope else ''} · run {run.id}",
        limits.EMBED_TITLE_MAX,
    )
    lines = [f"Status: **{run.status}** · Health: **{run.health}**"]
    if run.started_at is not None:
        lines.append(f"Started {timestamp(run.started_at)} by {person(run.started_by)}")
    else:
        lines.append(f"Scheduled for {timestamp(run.scheduled_for, 'f')} ({timestamp(run.scheduled_for)})")
    if run.ended_at is not None:
        lines.append(f"Ended {timestamp(run.ended_at)}")
    if run.health == Health.STALLED and run.in_flight:
        lines.append(
            "⚠️ Stalled: no runner has moved this run on when it should have. "
            "Check that the bot's runner is alive (the staff log says since when)."
        )
    last_error = last_error_text(run)
    if last_error:
        # A failed step named as its line below names it (its id, with its label).
        lines.append(f"Last error: {clip(last_error, 500)}")
    pruned = pruned_text(run)
    if pruned:
        lines.append(pruned)
    if run.cleanup is not None:
        lines.append(clip(cleanup_line(run.cleanup), 1000))
    if run.unreadable:
        lines.append(
            f"⚠️ Its definition (version id {run.version_id}) cannot be read: {clip(run.unreadable, 500)}. "
            "The runner leaves this run alone; cancel it, and start the event again once it is republished."
        )
    embed = discord.Embed(title=title, description="\n".join(lines), colour=status_colour(run.status))
    if reminders:
        embed.add_field(
            name="Reminders", value=_field_value([_reminder_line(r) for r in reminders]), inline=False
        )
    phases = list(run.phases)
    room = limits.EMBED_FIELDS_MAX - (1 if reminders else 0)
    shown = phases[: room - 1] if len(phases) > room else phases
    for phase in shown:
        current = phase.current and run.in_flight
        name = clip(f"{'▶ ' if current else ''}{phase.label}", limits.EMBED_FIELD_NAME_MAX)
        embed.add_field(name=name, value=_field_value([_step_line(s) for s in phase.steps]), inline=False)
    if len(shown) < len(phases):
        embed.add_field(name="…", value=f"{len(phases) - len(shown)} more phases", inline=False)
    embed.set_footer(text=f"{run.definition_key} · version {run.version_id}")
    return fit(embed)


def _run_line(r: RunSummary) -> str:
    return (
        f"`{r.id}` {clip(r.title, 60)}{' (' + clip(r.scope, 40) + ')' if r.scope else ''} — "
        f"{r.status}{', ' + r.health if r.health != Health.OK else ''}{' · ' + REHEARSAL_MARK if r.rehearsal else ''}"
        + (" · ⚠️ definition unreadable" if r.unreadable else "")
        + ("" if r.cleanup_status is CleanupStatus.NOT_REQUIRED else f" · cleanup {r.cleanup_status}")
    )


def runs_embed(runs: Sequence[RunSummary], title: str = "Runs in flight") -> discord.Embed:
    description = _field_value([_run_line(r) for r in runs], limits.EMBED_DESCRIPTION_MAX)
    return discord.Embed(title=title, description=description if runs else "Nothing is in flight.")


def _definition_line(d: DefinitionSummary) -> str:
    if d.unreadable:
        return f"`{d.key}` {clip(d.title, 60)} — v{d.version}, ⚠️ unreadable: {clip(d.unreadable, 300)}"
    line = f"`{d.key}` {clip(d.title, 60)} — v{d.version}, {clip(d.schedule, 60)}" + (
        f", scopes: {fit_list('', d.scopes, 80, item_max=40)}" if d.scopes else ""
    )
    if d.next_at is not None:
        line += f"\n  ↳ next {_when(d.next_at)}"
    return line


def _when(moment: dt.datetime) -> str:
    """An instant as every reader sees it in their own zone: the date and time, and how far off."""
    return f"{timestamp(moment, 'F')} ({timestamp(moment)})"


def list_embed(definitions: Sequence[DefinitionSummary], runs: Sequence[RunSummary]) -> discord.Embed:
    embed = discord.Embed(title="Events")
    lines = [_definition_line(d) for d in definitions]
    embed.add_field(name="Published", value=_field_value(lines) if lines else "None yet.")
    in_flight = _field_value([_run_line(r) for r in runs]) if runs else "Nothing is in flight."
    embed.add_field(name=in_flight_name(runs), value=in_flight, inline=False)
    return fit(embed)


def in_flight_name(runs: Sequence[RunSummary]) -> str:
    """ "In flight", with how many of those runs are only booked (scheduled, not started): a
    scheduled run is in flight, but nothing of it has happened yet."""
    scheduled = sum(r.status == RunStatus.SCHEDULED for r in runs)
    if not scheduled:
        return "In flight"
    return f"In flight ({scheduled} scheduled, not started yet; {len(runs) - scheduled} under way)"


# ── /event upcoming ──────────────────────────────────────────────────────────

UPCOMING_HELP = (
    "Times are in your own time zone. A run id is an occurrence already created: "
    "`/event cancel` cancels it before it starts (its reminders too)."
)
# Kept back for the field that counts the events left out.
UPCOMING_MORE_ROOM = 100


def _occurrence_line(scope: str, occurrence: Upcoming) -> str:
    where = f"**{clip(scope, 40)}** · " if scope else ""
    if occurrence.skipped:
        return f"{where}~~{timestamp(occurrence.at, 'F')}~~ skipped"
    run = f" · run `{occurrence.run_id}`" if occurrence.run_id is not None else ""
    moved = f" · moved from {timestamp(occurrence.moved_from, 'F')}" if occurrence.moved_from else ""
    return f"{where}{_when(occurrence.at)}{run}{moved}"


def _upcoming_lines(event: UpcomingEvent) -> list[str]:
    if event.unreadable:
        return [f"⚠️ Its definition cannot be read, so nothing of it will run: {clip(event.unreadable, 300)}"]
    if not event.scheduled:
        return ["No schedule: it starts only when staff start it."]
    head = clip(event.schedule, 120)
    if event.reminders:
        head += f" · reminders {', '.join(event.reminders)} before"
    lines = [head]
    for scope in event.scopes:
        lines.extend(_occurrence_line(scope.scope, o) for o in scope.occurrences)
    if len(lines) == 1:
        lines.append("Nothing to come: the schedule has no more occurrences.")
    return lines


def upcoming_embed(events: Sequence[UpcomingEvent]) -> discord.Embed:
    """Each event's next occurrences per scope as Discord timestamps, within Discord's limits:
    events beyond the field limit are counted, occurrences beyond a field's size too."""
    embed = discord.Embed(
        title="Upcoming", description=UPCOMING_HELP if events else "No scheduled events are published."
    )
    shown = events[: limits.EMBED_FIELDS_MAX - 1] if len(events) > limits.EMBED_FIELDS_MAX else events
    names = [clip(f"{event.title} ({event.key})", limits.EMBED_FIELD_NAME_MAX) for event in shown]
    # Shared out so that every event keeps its first lines: trimming the longest fields after the
    # fact (``fit``) would leave many events a bare "…".
    room = limits.EMBED_TOTAL_MAX - len(embed) - sum(map(len, names)) - UPCOMING_MORE_ROOM
    size = min(limits.EMBED_FIELD_VALUE_MAX, room // max(len(shown), 1))
    for name, event in zip(names, shown, strict=True):
        embed.add_field(name=name, value=_field_value(_upcoming_lines(event), size), inline=False)
    if len(shown) < len(events):
        embed.add_field(
            name="…",
            value=f"{len(events) - len(shown)} more events: name one with `/event upcoming event:`",
            inline=False,
        )
    return fit(embed)


# ── Preflight ────────────────────────────────────────────────────────────────


def problems_embed(title: str, problems: Sequence[Problem], *, rehearsal: bool) -> discord.Embed:
    verb = "rehearse" if rehearsal else "start"
    lines = [f"• {clip(p.where(), 120)}: {clip(p.message, 300)}" for p in problems]
    embed = discord.Embed(
        title=clip(f"Preflight found {len(problems)} problem(s) in {title}", limits.EMBED_TITLE_MAX),
        description=_field_value(lines, limits.EMBED_DESCRIPTION_MAX - 200)
        + f"\n\nNothing was started. Fix these, or press **{verb.title()} anyway**.",
        colour=0xE67E22,
    )
    return embed


# ── The staff log ────────────────────────────────────────────────────────────
