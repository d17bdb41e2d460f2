"""Reminders through the real bot in simcord (issue 11): a cron event's reminders are posted at
their virtual moments before the start, with the start as a Discord timestamp and the step's
idempotency key as the message nonce; they survive a restart of the bot; an occurrence staff
cancel with ``/event cancel`` while it is still upcoming posts none."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from bot.discord_messages import nonce_for
from runner.definitions import REMINDERS_PHASE
from runner.schema import steps
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim
from tests.support.definitions import announce, cron, event, phase

# The simulation starts at midnight UTC; the event is daily at 00:12.
START_SECONDS = 12 * 60


def reminded_spec() -> dict[str, Any]:
    return event(
        "quiz",
        phase("main", announce("Quiz time!")),
        title="Pub Quiz",
        schedule=cron("12 0 * * *"),
        reminders=[
            {
                "before": "5m",
                "channel": "announcements",
                "content": "{title} starts {start} ({start_relative})",
            },
            {"before": "2m", "channel": "announcements", "content": "Two minutes to {title}!"},
        ],
    )


def stamp(sim: Sim) -> int:
    midnight = sim.env.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return int((midnight + dt.timedelta(seconds=START_SECONDS)).timestamp())


async def quiz_run(sim: Sim) -> Any:
    runs = [r for r in await list_runs(sim.engine) if r.definition_key == "quiz"]
    assert runs, "the occurrence was not created"
    return await sim.run(min(r.id for r in runs))


async def reminder_keys(sim: Sim, run_id: int) -> list[str]:
    query = (
        sa.select(steps.c.idempotency_key)
        .where(steps.c.run_id == run_id, steps.c.phase == REMINDERS_PHASE)
        .order_by(steps.c.seq)
    )
    async with sim.engine.connect() as conn:
        return list((await conn.execute(query)).scalars().all())


def contents(sim: Sim) -> list[str]:
    return [m.content for m in sim.announcements.history()]


async def advance_to(sim: Sim, seconds_after_midnight: float) -> None:
    """Advance in steps of a couple of minutes: each ``advance_time`` has its own settle budget."""
    midnight = sim.env.now().replace(hour=0, minute=0, second=0, microsecond=0)
    left = seconds_after_midnight - (sim.env.now() - midnight).total_seconds()
    while left > 0:
        await sim.env.advance_time(min(left, 120.0))
        left = seconds_after_midnight - (sim.env.now() - midnight).total_seconds()


async def test_a_cron_events_reminders_are_posted_at_their_moments_with_the_start_timestamp(sim: Sim) -> None:
    """Nothing before 00:07; the 5-minute reminder just after it, naming the start as
    ``<t:…:F>`` and ``<t:…:R>`` and sent with its step's key as nonce; the 2-minute one just
    after 00:10; then the event itself at 00:12, and no reminder after it."""
    start = stamp(sim)
    await sim.publish(reminded_spec())
    await advance_to(sim, 7 * 60 - TICK)
    assert contents(sim) == []
    await advance_to(sim, 7 * 60 + TICK)
    assert contents(sim) == [f"Pub Quiz starts <t:{start}:F> (<t:{start}:R>)"]
    keys = await reminder_keys(sim, (await quiz_run(sim)).id)
    posts = sim.posts_to(sim.announcements)
    assert len(posts) == 1
    sent_nonce = (posts[0].json or {}).get("nonce")
    assert sent_nonce == nonce_for(keys[0]), "sent with its step's key as nonce"

    await advance_to(sim, 10 * 60 - TICK)
    assert len(contents(sim)) == 1
    await advance_to(sim, 10 * 60 + TICK)
    assert contents(sim)[-1] == "Two minutes to Pub Quiz!"
    status = (await sim.mod.slash(sim.staff, "event status", run=(await quiz_run(sim)).id)).response
    reminders = next(f for f in status.embeds[0].fields if f.name == "Reminders")
    lines = reminders.value.splitlines()
    assert len(lines) == 2 and all(line.endswith("— sent") for line in lines), lines
    await advance_to(sim, START_SECONDS + 2 * TICK)
    assert contents(sim)[-1] == "Quiz time!"
    assert len(contents(sim)) == 3
    assert (await quiz_run(sim)).status == "completed"


async def test_reminders_survive_a_restart_of_the_bot(sim: Sim) -> None:
    """The occurrence and its reminders were stored before the bot restarted at 00:04: the new
    process posts the 5-minute reminder at 00:07, once."""
    await sim.publish(reminded_spec())
    await advance_to(sim, 4 * 60)
    with sim.env.time_context():
        await sim.start_bot()
    await advance_to(sim, 7 * 60 + TICK)
    assert len(contents(sim)) == 1 and contents(sim)[0].startswith("Pub Quiz starts <t:")


async def test_an_upcoming_occurrence_cancelled_with_event_cancel_posts_no_reminder(sim: Sim) -> None:
    """Staff cancel the 00:12 occurrence at 00:01 with ``/event cancel``: it is cancelled at
    once with its reminders, and nothing is posted at 00:07, 00:10 or 00:12."""
    await sim.publish(reminded_spec())
    await advance_to(sim, 60)
    run = await quiz_run(sim)
    assert run.status == "scheduled"
    result = await sim.mod.slash(sim.staff, "event cancel", run=run.id, reason="quizmaster is ill")
    assert f"run {run.id} cancelled" in (result.response.content or "")
    await advance_to(sim, START_SECONDS + 2 * TICK)
    assert contents(sim) == []
    assert (await quiz_run(sim)).status == "cancelled"
