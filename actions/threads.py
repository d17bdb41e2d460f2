"""``discord.thread``: a thread on the run's announcement, where attendees talk.

The thread is started on an announcement an earlier step of the same run posted: the one whose
step is labelled ``on``, or, without ``on``, the run's latest (its phases' announcements, not
its reminders). One thread per announcement, however often the step is retried: Discord allows
one thread per message and answers a second attempt with 160004 ("a thread has already been
created for this message"), which the delivery takes as success, deriving the thread from the
message (a thread started from a message has the message's id). So a process that died between
the thread's creation and the step's end never leaves two.

The thread is recorded for the run (``bridge.threads``); the bot adds the run's confirmed
attendees to it and archives it when the run ends (``bot.event_threads``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import Field, field_validator

from actions.delivery import Delivery, DeliveryError, ThreadRequest
from actions.messaging import DISCORD_BUDGET_MS, Describe, _Params, _placeholders_known, render
from bridge.threads import Announced
from runner.registry import Action, Envelope
from runner.states import AnswerKey
from runner.views import StepContext

# Discord's limit on a channel's (and so a thread's) name.
THREAD_NAME_MAX = 100
# How long Discord keeps a quiet thread open before archiving it on its own, in minutes: the
# values it accepts. The bot archives the thread itself when the run ends.
AUTO_ARCHIVE_MINUTES = (60, 1440, 4320, 10080)


class ThreadStore(Protocol):
    """The run's side: which announcement a thread goes on, and the thread once started."""

    async def announcement(self, run_id: int, label: str | None) -> Announced | None: ...

    async def record(self, run_id: int, step_id: int, channel_id: str, thread_id: str) -> None: ...


@dataclass
class RecordingThreads:
    """``ThreadStore`` in memory, for checking definitions and for tests: the announcements a
    run posted are given by the test, the threads recorded are kept."""

    posted: dict[tuple[int, str | None], Announced] = field(default_factory=dict)
    recorded: list[tuple[int, int, str, str]] = field(default_factory=list)

    async def announcement(self, run_id: int, label: str | None) -> Announced | None:
        return self.posted.get((run_id, label))

    async def record(self, run_id: int, step_id: int, channel_id: str, thread_id: str) -> None:
        self.recorded.append((run_id, step_id, channel_id, thread_id))


class ThreadParams(_Params):
    name: str = Field(min_length=1, max_length=THREAD_NAME_MAX, description="the thread's name")
    on: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="the label of an earlier discord.announce step (default: the run's latest announcement)",
    )
    auto_archive_minutes: int = 1440

    _placeholders = field_validator("name")(_placeholders_known)

    @field_validator("auto_archive_minutes")
    @classmethod
    def _archive(cls, value: int) -> int:
        if value not in AUTO_ARCHIVE_MINUTES:
            raise ValueError(
                f"Discord archives a quiet thread after {', '.join(map(str, AUTO_ARCHIVE_MINUTES))} minutes"
            )
        return value


def thread_name(params: ThreadParams, scope: str, context: StepContext | None) -> str:
    # ``{scope}`` and ``{title}`` can make it longer than its text: cut, never refused mid-run.
    return (render(params.name, scope, context) or params.name)[:THREAD_NAME_MAX]


def thread_action(
    delivery: Delivery, describe: Describe, store: ThreadStore, *, budget_ms: int = DISCORD_BUDGET_MS
) -> Action[ThreadParams]:
    async def perform(envelope: Envelope, params: ThreadParams) -> dict[str, Any]:
        if envelope.verify:
            # The channel is the announcement's, known only once a run posts it: the start's
            # preflight checks the thread permissions there (``runner.preflight.thread_channels``).
            return {AnswerKey.OK: True}
        announced = await store.announcement(envelope.run_id, params.on)
        if announced is None:
            which = f"labelled {params.on!r}" if params.on else "of this run's steps"
            return {
                AnswerKey.OK: False,
                AnswerKey.RETRY: False,
                AnswerKey.ERROR: f"no announcement {which} has been posted yet: a thread is started on one",
            }
        context = await describe(envelope.run_id, envelope.step_id)
        request = ThreadRequest(
            name=thread_name(params, envelope.scope, context),
            channel_id=announced.channel_id,
            message_id=announced.message_id,
            auto_archive_minutes=params.auto_archive_minutes,
            run_id=envelope.run_id,
            step_id=envelope.step_id,
            context=context,
        )
        try:
            started = await delivery.start_thread(request)
        except DeliveryError as exc:
            return {AnswerKey.OK: False, AnswerKey.RETRY: exc.transient, AnswerKey.ERROR: str(exc)}
        await store.record(envelope.run_id, envelope.step_id, started.channel_id, started.thread_id)
        return {AnswerKey.OK: True, AnswerKey.OUTPUT: {"thread": started.as_dict()}}

    return Action(
        id="discord.thread",
        label="Start a thread on the announcement",
        risk="notify",
        reversible="automatic",
        version=1,
        budget_ms=budget_ms,
        params_model=ThreadParams,
        perform=perform,
        description="Starts one thread on the run's announcement; attendees are added, and it is archived when the run ends.",
    )
