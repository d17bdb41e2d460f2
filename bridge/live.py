"""A run's live message as the store tells it, with no Discord in it: where the run is (phase *i*
of *n*, the current step), what it waits for and until when, the last thing a person did to it,
where its steps posted (channel and message ids), its sign-up list when its event has ``signup:``
(``runner.signups``), and, once it is over, how it ended; and where its live message is.

The bot renders ``LiveView`` as the embed it keeps edited in the staff channel
(``bot.cogs.live._loop``); the staff log links a run's lines to ``live_message_of``.

What counts as "the last human action": a start by a person (not the schedule), a pause,
resume, cancel or retry control, and a cue's Confirm or Skip, each with the actor its run-log
line keeps. The tick's own moves are not human actions.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.sql import live_messages as live_sql
from runner import catalog, history, signups
from runner.approvals import asks_approval
from runner.bus import Event
from runner.db import retry_on_conflict
from runner.history import Actor, Entry, RunEnding
from runner.records import RunRecord
from runner.sql import run_log as run_log_sql
from runner.sql import runs as runs_sql
from runner.states import RUN_TERMINAL, STEP_OPEN, Control, RunStatus, StepStatus
from runner.views.runs import RunView, StepView, run_view, step_name

# The actor the schedule starts its occurrences as: a start, but nobody's hand.
SCHEDULE_ACTOR = "schedule"


@dataclass(frozen=True)
class LiveMessagePosted(Event):
    """A run's live message went up: the staff log links a new run's lines to it."""

    run_id: int


class WaitKind(enum.Enum):
    """What a run in flight waits for. A tag the renderer matches on, never stored, sent or
    compared with a string: its members have no words of their own."""

    START = enum.auto()  # scheduled, not started yet
    BLOCKED = enum.auto()  # another run holds its concurrency key
    GM = enum.auto()  # a cue posted, waiting for a GM's Confirm or Skip
    APPROVAL = enum.auto()  # a risky step's card posted, waiting for staff's Approve or Skip
    WAIT = enum.auto()  # the next step is held until a time (a wait)
    RETRY = enum.auto()  # a step failed and is retried at a time
    PAUSED = enum.auto()  # paused by a person, or by a step that failed
    ACTION = enum.auto()  # a step's action is running now


@dataclass(frozen=True)
class Waiting:
    kind: WaitKind
    # Naive UTC; None when it waits for a person rather than a time.
    until: dt.datetime | None = None
    error: str | None = None
    by: Actor | None = None
    holder_run_id: int | None = None
    key: str | None = None


@dataclass(frozen=True)
class HumanAction:
    # start, pause, resume, cancel, retry (controls) or confirm, skip (a cue's buttons).
    what: str
    by: Actor
    at: dt.datetime
    step: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class PostedLink:
    step: str
    channel_id: int
    message_id: int


@dataclass(frozen=True)
class LiveView:
    run: RunView
    # 1-based; None before the first phase is entered (or when the phase is unknown).
    phase_index: int | None
    phase_count: int
    phase_label: str | None
    # The current step, as ``step_name`` names it.
    step: str | None
    waiting: Waiting | None
    last_action: HumanAction | None
    posted: list[PostedLink] = field(default_factory=list)
    ending: RunEnding | None = None
    # The run's sign-ups (None: its event takes none); the message shows the counts.
    signup_list: signups.SignupList | None = None

    @property
    def ended(self) -> bool:
        return self.run.status in RUN_TERMINAL


async def live_message_of(engine: AsyncEngine, run_id: int) -> tuple[int, int] | None:
    """The staff channel and message id of the run's live message, or None while it has none
    (not posted yet, the switch is off, or someone deleted it and the new one is not up yet)."""
    async with engine.connect() as conn:
        row = await live_sql.posted(conn, run_id)
    if row is None:
        return None
    return int(row["channel_id"]), int(row["message_id"])


async def live_view(
    engine: AsyncEngine, run_id: int, versions: catalog.VersionCache, now: dt.datetime
) -> LiveView | None:
    """What the run's live message shows at ``now`` (naive UTC); None for a run that is gone."""
    run = await run_view(engine, run_id, versions)
    if run is None:
        return None
    async with engine.connect() as conn:
        record = await runs_sql.get(conn, run_id)
        entries = await history.entries_for_run(conn, run_id)
        ending = (
            await history.how_run_ended(conn, run_id, run.status, run.last_error)
            if run.status in RUN_TERMINAL
            else None
        )
    if record is None:
        return None
    listed = await signups.listing(engine, run_id)
    return build_live_view(run, record, entries, now, ending, listed)


def build_live_view(
    run: RunView,
    record: RunRecord,
    entries: Sequence[Entry],
    now: dt.datetime,
    ending: RunEnding | None = None,
    listed: signups.SignupList | None = None,
) -> LiveView:
    phases = run.phases
    index = next((i for i, p in enumerate(phases) if p.key == run.current_phase), None)
    phase = phases[index] if index is not None else None
    current = _current_step(phase.steps) if phase is not None and run.in_flight else None
    return LiveView(
        run=run,
        phase_index=None if index is None else index + 1,
        phase_count=len(phases),
        phase_label=phase.label if phase is not None else None,
        step=step_name(current.id, current.label) if current is not None else None,
        waiting=_waiting(run, record, current, entries, now),
        last_action=_last_action(entries, run),
        posted=_posted(run),
        ending=ending,
        signup_list=listed,
    )


def _current_step(steps: Sequence[StepView]) -> StepView | None:
    """The step the phase is at: its first open one, or (paused after a failure) the failed one
    furthest along."""
    open_ = [s for s in steps if s.id is not None and s.status in STEP_OPEN]
    if open_:
        return open_[0]
    failed = [s for s in steps if s.status == StepStatus.FAILED]
    return failed[-1] if failed else None


def _waiting(
    run: RunView, record: RunRecord, step: StepView | None, entries: Sequence[Entry], now: dt.datetime
) -> Waiting | None:
    status = run.status
    if status in RUN_TERMINAL:
        return None
    if status == RunStatus.SCHEDULED:
        if record.blocked_by is not None:
            return Waiting(
                WaitKind.BLOCKED, holder_run_id=record.blocked_by, key=_blocked_key(entries, record)
            )
        return Waiting(WaitKind.START, until=run.scheduled_for)
    if status == RunStatus.PAUSED:
        pause = _last_pause(entries)
        by = pause.actor if pause is not None and _is_person(pause.actor) else None
        error = None if by is not None else (step.last_error if step is not None else None) or run.last_error
        return Waiting(WaitKind.PAUSED, by=by, error=error)
    if step is None:
        if record.held_until is not None and record.held_until > now:
            return Waiting(WaitKind.WAIT, until=record.held_until)
        return None
    if step.parked:
        return Waiting(WaitKind.APPROVAL if asks_approval(step.result) else WaitKind.GM)
    if step.status == StepStatus.RUNNING:
        return Waiting(WaitKind.ACTION)
    if step.status == StepStatus.PENDING and step.due_at is not None and step.due_at > now:
        if step.attempts > 0 and step.last_error:
            return Waiting(WaitKind.RETRY, until=step.due_at, error=step.last_error)
        return Waiting(WaitKind.WAIT, until=step.due_at)
    return None


def _blocked_key(entries: Sequence[Entry], record: RunRecord) -> str | None:
    for entry in reversed(entries):
        if isinstance(entry.event, history.RunBlocked):
            return entry.event.key
    return record.concurrency_key


def _last_pause(entries: Sequence[Entry]) -> Entry | None:
    for entry in reversed(entries):
        event = entry.event
        if isinstance(event, history.RunStatusChanged) and event.to == RunStatus.PAUSED:
            return entry
    return None


def _is_person(actor: Actor | None) -> bool:
    return actor is not None and not (actor.id is None and actor.name == SCHEDULE_ACTOR)


def _last_action(entries: Sequence[Entry], run: RunView) -> HumanAction | None:
    names = {s.id: step_name(s.id, s.label) for p in run.phases for s in p.steps if s.id is not None}
    for entry in reversed(entries):
        actor = entry.actor
        if actor is None or not _is_person(actor):
            continue
        event = entry.event
        step = names.get(entry.step_id) if entry.step_id is not None else None
        if entry.step_id is not None and step is None:
            step = step_name(entry.step_id)
        if isinstance(event, history.RunCreated):
            return HumanAction(Control.START, actor, entry.at)
        if isinstance(event, history.RunStatusChanged) and event.control:
            return HumanAction(event.control, actor, entry.at, note=event.reason)
        if isinstance(event, history.StepConfirmed):
            return HumanAction(Control.CONFIRM, actor, entry.at, step, event.note)
        if isinstance(event, history.StepSkipped):
            return HumanAction(Control.SKIP, actor, entry.at, step, event.note)
        if isinstance(event, history.StepRequeued):
            return HumanAction(Control.RETRY, actor, entry.at, step)
        if isinstance(event, history.StepApproved):
            return HumanAction(Control.APPROVE, actor, entry.at, step)
    return None


def _posted(run: RunView) -> list[PostedLink]:
    """Where the run's steps posted, in step order; a delivery that is not Discord's (the
    rehearsal's console) names channels by alias and gives no link."""
    links = []
    for phase in run.phases:
        for step in phase.steps:
            posted = (step.result or {}).get("posted") if isinstance(step.result, dict) else None
            if not isinstance(posted, dict) or step.id is None:
                continue
            channel, message = str(posted.get("channel_id", "")), str(posted.get("message_id", ""))
            if channel.isdigit() and message.isdigit():
                links.append(PostedLink(step_name(step.id, step.label), int(channel), int(message)))
    return links


# ── The message's own bookkeeping ────────────────────────────────────────────
# The one place a front end writes here: the row is the live message's, not the run's, and
# every statement is in ``bridge.sql.live_messages``.


@dataclass(frozen=True)
class LiveRow:
    run_id: int
    channel_id: int
    message_id: int | None
    # Messages posted so far: the next post's nonce is built from it.
    posts: int
    digest: str | None
    closed: bool


def _row(row: sa.RowMapping) -> LiveRow:
    message = row["message_id"]
    return LiveRow(
        int(row["run_id"]),
        int(row["channel_id"]),
        None if message is None else int(message),
        int(row["posts"]),
        row["digest"],
        bool(row["closed"]),
    )


@dataclass(frozen=True)
class Changes:
    """The runs the run log says moved since the last read, and whether more lines wait."""

    run_ids: list[int]
    more: bool


class LiveMessages:
    """The live messages' rows: who posts a run's message (a claim taken before the post), the
    id Discord gave it, the digest of its last render, and whether its end has been shown."""

    CHANGES_LIMIT = 1000

    def __init__(self, engine: AsyncEngine, owner: str) -> None:
        self.engine = engine
        self.owner = owner

    async def follow_from_now(self) -> run_log_sql.LogFollower:
        async with self.engine.connect() as conn:
            return await run_log_sql.LogFollower.from_now(conn)

    async def changes(self, follower: run_log_sql.LogFollower) -> Changes:
        """The runs of the lines ``follower`` had not delivered (delivered now: a run once
        marked to look at is looked at until its message is right)."""
        async with self.engine.connect() as conn:
            rows, more = await follower.read(conn, self.CHANGES_LIMIT, ("run_id",))
        follower.delivered(int(r["id"]) for r in rows)
        return Changes(list(dict.fromkeys(int(r["run_id"]) for r in rows)), more)

    async def to_reconcile(self, limit: int) -> list[int]:
        """At start: every message not closed yet, and the runs in flight that have none."""
        async with self.engine.connect() as conn:
            open_ids = await live_sql.open_run_ids(conn, limit)
            unfollowed = await live_sql.unfollowed_in_flight(conn, limit)
        return sorted(set(open_ids) | set(unfollowed))

    async def get(self, run_id: int) -> LiveRow | None:
        async with self.engine.connect() as conn:
            row = await live_sql.get(conn, run_id)
        return None if row is None else _row(row)

    async def followable(self, run_id: int) -> bool:
        async with self.engine.connect() as conn:
            return await live_sql.followable(conn, run_id)

    async def signup_counts(self) -> dict[int, frozenset[tuple[str, str, int]]]:
        """Per run whose message is open, its sign-up counts as (option, status, how many): a
        change here is a change the message shows, though the run log has no line for it."""
        async with self.engine.connect() as conn:
            rows = await live_sql.signup_counts_of_open(conn)
        found: dict[int, set[tuple[str, str, int]]] = {}
        for row in rows:
            found.setdefault(int(row["run_id"]), set()).add(
                (str(row["option"]), str(row["status"]), int(row["n"]))
            )
        return {run_id: frozenset(counts) for run_id, counts in found.items()}

    async def count_open(self) -> int:
        async with self.engine.connect() as conn:
            return await live_sql.count_open(conn)

    @retry_on_conflict
    async def claim(
        self, run_id: int, channel_id: int, now: dt.datetime, until: dt.datetime
    ) -> LiveRow | None:
        """The row of a message this process is now to post (created here, or an unposted one
        nobody holds); None when another process holds it or it is posted."""
        async with self.engine.begin() as conn:
            if await live_sql.claim_new(conn, run_id, str(channel_id), self.owner, until, now):
                row = await live_sql.get(conn, run_id)
                return None if row is None else _row(row)
            before = await live_sql.claim_unposted(conn, run_id, self.owner, until, now)
        return None if before is None else _row(before)

    @retry_on_conflict
    async def posted(self, run_id: int, message_id: int, digest: str, closed: bool, now: dt.datetime) -> bool:
        async with self.engine.begin() as conn:
            return await live_sql.store_posted(
                conn, run_id, self.owner, message_id=str(message_id), digest=digest, closed=closed, now=now
            )

    @retry_on_conflict
    async def release(self, run_id: int, retry_at: dt.datetime, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await live_sql.release(conn, run_id, self.owner, retry_at, now)

    @retry_on_conflict
    async def edited(self, run_id: int, message_id: int, digest: str, closed: bool, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await live_sql.store_edit(conn, run_id, str(message_id), digest=digest, closed=closed, now=now)

    @retry_on_conflict
    async def forget(self, run_id: int, message_id: int, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await live_sql.forget_message(conn, run_id, str(message_id), now)

    @retry_on_conflict
    async def close(self, run_id: int, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await live_sql.close(conn, run_id, now)
