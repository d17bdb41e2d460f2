"""The staff log's words: one ``Line`` per run-log entry staff should be told of (a control or a
cue action and who pressed it, a step that failed or is retried and why, a run missed, degraded
or stalled, a reminder that did not go out, ...), the message each line links to, and the
packing of lines into as few messages as Discord allows. ``bot.cogs.staff_log._loop`` posts them and
``bot.cogs.staff_log._bursts`` sums a burst up.

Steps are named by ``runner.views.step_name`` (the number ``/event skip`` takes and the status
embed shows), people by a mention, and nothing a moderator reads names an internal state.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from actions import limits
from bot.cogs.staff_log._said import (
    GAME_ACTIONS,
    Said,
    after_attempts,
    cleanup_words,
    game_words,
    signup_words,
    staff_signup_words,
)
from bot.rendering import clip, person, run_name, timestamp
from runner import history
from runner.definitions import shown_duration
from runner.states import (
    Control,
    Health,
    RunStatus,
    SignupOverride,
)
from runner.views import RunView, StepView, step_name

# What a person reads as the message a step posted, by the step's action.
_POSTED_AS = {"gm.cue": "cue", "discord.announce": "announcement", "discord.signup": "sign-up message"}


@dataclass(frozen=True)
class Link:
    """A message a line concerns: where it is, and what a moderator calls it."""

    channel_id: int
    message_id: int
    label: str

    def jump(self, guild_id: int | str) -> str:
        """A masked jump link (the mention-free form: ``allowed_mentions`` none still applies)."""
        return f"[{self.label}](https://discord.com/channels/{guild_id}/{self.channel_id}/{self.message_id})"


@dataclass(frozen=True)
class Line:
    """One line of the staff log, before its link is added (``text`` then `` · [cue](…)``).

    ``group`` is what a burst's summary says of every run in it ("started on schedule"); lines of
    one event with the same icon and group are summed up together (``bot.cogs.staff_log._bursts``); ``None``
    is never summed up (its run could not be read). ``link`` is the message the line's own step
    posted; a line without one links to its run's live message, or the run's latest post."""

    icon: str
    name: str
    # What follows the run's name: `` started on schedule``, ``: step 5 (Open the gates) …``.
    body: str
    run_id: int
    entry_ids: tuple[int, ...]
    step_id: int | None = None
    group: str | None = None
    link: Link | None = None
    # The event the run belongs to, its title, scope and whether it rehearses (for a summary).
    event: tuple[str, bool] | None = None
    title: str = ""
    scope: str = ""
    # False for a burst's summary: it has hundreds of runs and links to none of them.
    linked: bool = True
    # When the run log wrote it (a line may wait a moment for its run's live message).
    at: dt.datetime | None = None

    @property
    def text(self) -> str:
        return f"{self.icon} {self.name}{self.body}"

    def with_entries(self, *ids: int) -> Line:
        return replace(self, entry_ids=tuple(sorted({*self.entry_ids, *ids})))


def posted_link(step: StepView | None) -> Link | None:
    """The message a step posted (its result's ``posted``), if it says where."""
    result = step.result if step is not None else None
    posted = result.get("posted") if isinstance(result, dict) else None
    if not isinstance(posted, dict):
        return None
    try:
        channel_id, message_id = int(posted["channel_id"]), int(posted["message_id"])
    except (KeyError, TypeError, ValueError):
        return None
    return Link(channel_id, message_id, _POSTED_AS.get(step.action_id, "message"))  # type: ignore[union-attr]


def latest_post(run: RunView | None) -> Link | None:
    """The last message the run's steps posted: where a run-level line points when the run has
    no live message."""
    steps = [s for p in run.phases for s in p.steps if s.id is not None] if run else []
    for step in sorted(steps, key=lambda s: s.id or 0, reverse=True):
        link = posted_link(step)
        if link is not None:
            return link
    return None


def _step(run: RunView | None, step_id: int | None) -> StepView | None:
    if run is None or step_id is None:
        return None
    return next((s for p in run.phases for s in p.steps if s.id == step_id), None)


def _step_label(run: RunView | None, step_id: int | None) -> str:
    step = _step(run, step_id)
    return step_name(step_id, clip(step.label, 80) if step else None)


def _what_step(run: RunView | None, step_id: int | None) -> str:
    """A step as a summary names it across runs: by label (each run's step has its own id)."""
    step = _step(run, step_id)
    return f"“{clip(step.label, 80)}”" if step else "a step"


# The events ``word`` can word; every other kind is history staff need not be told.
# A reminder that went out is not posted (one line per reminder per occurrence is noise in a
# channel staff read for what needs them); one that did not go out is.
LOGGED_EVENTS: tuple[type[history.Event], ...] = (
    history.RunStatusChanged,
    history.RunBlocked,
    history.RunDegraded,
    history.RunStalled,
    history.RunRecovered,
    history.ReminderSkipped,
    history.ReminderFailed,
    history.RunRepointed,
    history.RunMoved,
    history.StepConfirmed,
    history.StepSkipped,
    history.StepApproved,
    history.StepRequeued,
    history.StepFailed,
    history.StepRetry,
    history.SignupPromoted,
    history.SignupLateCancel,
    history.SignupChangedByStaff,
    history.SignupsOverridden,
    history.CleanupStarted,
    history.UndoRan,
    history.UndoFailed,
    history.CleanupFinished,
)


def logged(event: history.Event) -> bool:
    """Whether ``word`` may say something of it: every other entry is not worth reading its run
    for (a 500-scope start writes 500 of them). Of the steps done, only a game's reply is said."""
    if isinstance(event, history.StepDone):
        return event.action in GAME_ACTIONS
    return isinstance(event, LOGGED_EVENTS)


def _lead(before: float | None) -> str:
    return f"the reminder {shown_duration(before)} before" if before else "a reminder"


def _note(note: str | None) -> str:
    return f" — “{clip(note, 200)}”" if note else ""


def word(entry: history.Entry, run: RunView | None) -> Line | None:
    """The staff log's line for one entry, or ``None`` for history staff need not be told."""
    said = _words(entry, run)
    if said is None:
        return None
    name = run_name(run.title, run.scope, entry.run_id, run.rehearsal) if run else f"run {entry.run_id}"
    link = posted_link(_step(run, entry.step_id)) if said.step_link else None
    return Line(
        icon=said.icon,
        name=name,
        body=said.text,
        run_id=entry.run_id,
        entry_ids=(entry.id,),
        step_id=entry.step_id,
        group=(said.group or said.text.lstrip(": ")) if run is not None else None,
        link=link,
        event=(run.definition_key, run.rehearsal) if run else None,
        title=run.title if run else "",
        scope=run.scope if run else "",
        at=entry.at,
    )


def log_line(entry: history.Entry, run: RunView | None) -> str | None:
    """The line's words alone (no link): what ``word`` says, as a moderator reads it."""
    line = word(entry, run)
    return line.text if line is not None else None


def _words(entry: history.Entry, run: RunView | None) -> Said | None:
    actor = person(entry.actor) if entry.actor else "staff"
    step = _step_label(run, entry.step_id)
    match entry.event:
        case history.StepDone(action=action) if action in GAME_ACTIONS:
            done = _step(run, entry.step_id)
            return game_words(done.result if done else None, step)
        case history.StepConfirmed(note=note):
            group = f"had {_what_step(run, entry.step_id)} confirmed by {actor}"
            return Said("☑️", f": {step} confirmed by {actor}{_note(note)}", group, step_link=True)
        case history.StepSkipped(note=note):
            group = f"had {_what_step(run, entry.step_id)} skipped by {actor}"
            return Said("⏭️", f": {step} skipped by {actor}{_note(note)}", group, step_link=True)
        case history.StepApproved(action=action, risk=risk):
            group = f"had {_what_step(run, entry.step_id)} approved by {actor}"
            what = f"{step} ({action}, {risk})" if risk else f"{step} ({action})"
            return Said("🔓", f": {what} approved by {actor}; it runs now", group, step_link=True)
        case history.StepRequeued(previous_error=error):
            why = f" (it had failed: {clip(error, 300)})" if error else ""
            group = f"retried {_what_step(run, entry.step_id)} by {actor}"
            return Said("🔁", f": {step} retried by {actor}{why}", group, step_link=True)
        case history.StepRetry(attempts=attempts, error=error, due_at=due):
            said = f"{step} failed (attempt {attempts}), trying again {timestamp(due)}: {clip(error, 300)}"
            group = f"failed at {_what_step(run, entry.step_id)}, trying again: {clip(error, 300)}"
            return Said("🔁", f": {said}", group, step_link=True)
        case history.StepFailed(error=error, attempts=attempts):
            said = f"{step} failed{after_attempts(attempts)}: {clip(error, 300)}; the run carries on past it"
            group = f"failed at {_what_step(run, entry.step_id)} and carried on: {clip(error, 300)}"
            return Said("❌", f": {said}", group, step_link=True)
        case history.RunBlocked(key=key, holder_run_id=holder):
            using = f"run {holder} is using `{key}` (one run at a time)"
            return Said("⏳", f" is waiting: {using}", f"are waiting: {using}")
        case history.RunDegraded(reason=reason):
            group = f"are degraded: {clip(_named_steps(reason, run, by_label=True), 300)}"
            return Said("⚠️", f" is degraded: {clip(_named_steps(reason, run), 300)}", group)
        case history.RunStalled() as stalled:
            why = _stalled_reason(stalled, run)
            return Said("🛑", f" is stalled: {why}", f"are stalled: {why}")
        case history.RunRecovered(to=to):
            still = (
                " (still degraded: one of its steps failed or is being retried)" if to != Health.OK else ""
            )
            return Said("▶️", f" is moving again{still}", f"are moving again{still}")
        case history.ReminderSkipped() as skipped:
            return _reminder_skipped(skipped)
        case history.ReminderFailed(error=error, before=before):
            text = f"{_lead(before)} could not be sent: {clip(error, 300)}"
            return Said("⚠️", f": {text}", f"did not get {text}")
        case history.RunRepointed(version=version):
            return Said("📝", f" will run version {version} of its event, published since it was scheduled")
        case history.RunMoved(to_at=to_at, version=version):
            return Said(
                "📅", f" now starts {timestamp(to_at)} (version {version} of its event moved the date)"
            )
        case history.RunStatusChanged() as moved:
            return _status_words(moved, entry, run, actor, step)
        case history.SignupPromoted() | history.SignupLateCancel() as signup:
            return signup_words(signup)
        case history.SignupChangedByStaff() as change:
            return staff_signup_words(change, actor)
        case history.SignupsOverridden(override=override):
            if override == SignupOverride.CLOSED:
                return Said("🔒", f": sign-ups closed by {actor}", f"had sign-ups closed by {actor}")
            return Said(
                "🔓",
                f": sign-ups reopened by {actor} until the run ends",
                f"had sign-ups reopened by {actor}",
            )
        case history.CleanupStarted() | history.UndoRan() | history.UndoFailed() | history.CleanupFinished():
            return cleanup_words(entry.event)
    return None


_STEP_ID = re.compile(r"\bstep (\d+)\b(?! \()")


def _named_steps(reason: str, run: RunView | None, *, by_label: bool = False) -> str:
    """The engine writes ``step 7 is being retried``: the step's label goes with its number (or,
    for a summary across runs, stands for it)."""
    name = _what_step if by_label else _step_label
    return _STEP_ID.sub(lambda m: name(run, int(m.group(1))), reason)


def _reminder_skipped(skipped: history.ReminderSkipped) -> Said | None:
    match skipped.reason:
        case history.ReminderSkip.LATE:
            late = shown_duration(skipped.late_seconds or 0)
            text = f"{_lead(skipped.before)} was not sent: its moment passed {late} ago (was the bot down?)"
            return Said("⏰", f": {text}", f"did not get {text}")
        case history.ReminderSkip.RUN_STARTED:
            text = f"{_lead(skipped.before)} was not sent: the event started first"
            return Said("⏰", f": {text}", f"did not get {text}")
    return None  # dropped by a new version: the run's re-point line says so


def _stalled_reason(stalled: history.RunStalled, run: RunView | None) -> str:
    if stalled.reason is history.StallReason.RECLAIMED:
        step = _step_label(run, stalled.step_id)
        return f"a runner died holding {step} {stalled.reclaims} times (is the bot crash-looping?)"
    overdue = int(stalled.overdue_seconds or 0) // 60
    return f"nobody has advanced it for {overdue} minutes past when it was due"


def _by_schedule(actor: object) -> bool:
    """The tick starts scheduled runs as the actor named ``schedule`` (no person to mention)."""
    return actor is None or getattr(actor, "name", actor) == "schedule"


# What a pause does to a step already under way, which the line must not hide: the claim of the
# next step checks the run is running, so nothing new starts; a step already dispatched is not
# recalled (nothing can recall a message already sent) and is settled as it answers, a cue
# posted then waits for a GM as usual (runner.controls.pause, runner.sql.step_leases.claim).
PAUSE_MEANS = "nothing new starts until it is resumed (a step already under way finishes)"


def _status_words(
    moved: history.RunStatusChanged, entry: history.Entry, run: RunView | None, actor: str, step: str
) -> Said | None:
    match moved.to:
        case RunStatus.STARTING:
            by = run.started_by if run else None
            how = "on schedule" if _by_schedule(by) else f"by {person(by)}"
            return Said("▶️", f" started {how}")
        case RunStatus.MISSED:
            return Said(
                "⚠️",
                " was missed: it did not start within its grace window",
                "were missed: none started in time",
            )
        case RunStatus.PAUSED if moved.control is None:
            # No control paused it: a step's ``on_failure: pause`` did.
            error = clip(moved.error or "", 400)
            group = f"paused after {_what_step(run, entry.step_id)} failed: {error}"
            return Said("⏸️", f" paused after {step} failed: {error}", group, step_link=True)
        case RunStatus.PAUSED:
            return Said("⏸️", f" paused by {actor}: {PAUSE_MEANS}", f"paused by {actor}")
        case RunStatus.RUNNING if moved.from_ is RunStatus.PAUSED and moved.control == Control.RETRY:
            return None  # the step's requeue line says who retried which step
        case RunStatus.RUNNING if moved.from_ is RunStatus.PAUSED:
            return Said("▶️", f" resumed by {actor}")
        case RunStatus.CANCELLED:
            return Said("⏹️", f" cancelled by {actor}: {clip(moved.reason or '', 300)}")
        case RunStatus.COMPLETED:
            return Said("✅", " completed")
        case RunStatus.FAILED:
            error = clip(moved.error or "", 400)
            group = f"failed at {_what_step(run, entry.step_id)}: {error}"
            return Said("❌", f" failed at {step}: {error}", group, step_link=True)
    return None


def fold(worded: Sequence[tuple[history.Entry, Line]]) -> list[Line]:
    """One line for what one transaction wrote about one step: a failure that paused or failed
    the run is said by the run's line (the step's own line would repeat its error), and the
    ``degraded`` a failure or a retry writes beside it goes in that line, not a line of its own."""
    out: list[Line] = []
    # Per run: where in ``out`` its latest step failure or retry is, while nothing else of the
    # run came after it.
    pending: dict[int, int] = {}
    for entry, line in worded:
        event = entry.event
        at = pending.get(entry.run_id)
        if at is not None and isinstance(event, history.RunDegraded):
            step_line = out[at]
            body = (
                step_line.body
                if step_line.body.startswith(" is degraded")
                else f" is degraded{step_line.body}"
            )
            out[at] = replace(step_line, body=body).with_entries(entry.id)
            continue
        if (
            at is not None
            and isinstance(event, history.RunStatusChanged)
            and event.to in (RunStatus.PAUSED, RunStatus.FAILED)
            and entry.step_id == out[at].step_id
        ):
            out[at] = line.with_entries(*out[at].entry_ids)
            del pending[entry.run_id]
            continue
        pending.pop(entry.run_id, None)
        if isinstance(event, (history.StepFailed, history.StepRetry)):
            pending[entry.run_id] = len(out)
        out.append(line)
    return out


def batch_lines(lines: Sequence[str], size: int = limits.CONTENT_MAX) -> list[str]:
    """Pack lines into as few messages as Discord's content limit allows."""
    return [text for text, _ in batch(lines, size)]


def batch(lines: Sequence[str], size: int = limits.CONTENT_MAX) -> list[tuple[str, range]]:
    """Pack lines into messages within ``size``, each with the range of lines it holds (the
    poster delivers a message's lines to its log follower only once it went out)."""
    messages: list[tuple[str, range]] = []
    current, start = "", 0
    for index, line in enumerate(lines):
        line = clip(line, size)
        if current and len(current) + 1 + len(line) > size:
            messages.append((current, range(start, index)))
            current, start = line, index
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        messages.append((current, range(start, len(lines))))
    return messages
