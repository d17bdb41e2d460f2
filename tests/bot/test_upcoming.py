"""``/event upcoming`` and the next occurrence in ``/event list`` (issue 11), through the real bot
in simcord: every time is a Discord timestamp, which each reader sees in their own zone.

The schedules are daily crons in UTC at an hour a few hours after the simulation's clock, so
the expected instants are worked out here with plain date arithmetic, not by the code tested.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from simcord import assert_error, assert_responded

from bot.cogs.control._render import UPCOMING_HELP
from runner.errors import UnknownDefinition
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim
from tests.support.definitions import announce, event, phase, wait


def stamp(moment: dt.datetime, style: str) -> str:
    return f"<t:{int(moment.replace(tzinfo=dt.UTC).timestamp())}:{style}>"


def when(moment: dt.datetime) -> str:
    return f"{stamp(moment, 'F')} ({stamp(moment, 'R')})"


def daily_at(sim: Sim, hours_ahead: int) -> tuple[int, list[dt.datetime]]:
    """The UTC hour ``hours_ahead`` from now, and that hour's next three days."""
    first = (sim.now() + dt.timedelta(hours=hours_ahead)).replace(minute=0, second=0, microsecond=0)
    return first.hour, [first + dt.timedelta(days=n) for n in range(3)]


def quiz(hour: int, **fields: Any) -> dict[str, Any]:
    spec = event(
        "quiz",
        phase("main", announce("The quiz {title} starts {start_relative}!"), wait(60)),
        title="Quiz night",
        schedule={"cron": f"0 {hour} * * *", "timezone": "UTC"},
        scopes=["eu", "us"],
    )
    spec.update(fields)
    return spec


async def created_runs(sim: Sim) -> dict[str, int]:
    return {
        r.scope: r.id for r in await list_runs(sim.engine, in_flight_only=True) if r.status == "scheduled"
    }


async def test_upcoming_lists_created_runs_by_id_then_those_to_come_as_discord_timestamps(sim: Sim) -> None:
    """Before: nothing showed that the evening's quiz was booked. Now each scope lists its next
    three occurrences: the run already created (status scheduled) with its id, so staff can
    cancel it, then the two to come, each as ``<t:…:F> (<t:…:R>)``; the reminders by lead time."""
    hour, days = daily_at(sim, 3)
    reminders = [
        {"before": "15m", "channel": "announcements", "content": "Quiz {start_relative}"},
        {"before": "1h", "channel": "announcements", "content": "Quiz at {start}"},
    ]
    await sim.publish(quiz(hour, reminders=reminders))
    await sim.env.advance_time(2 * TICK)  # the runner's housekeeping creates the next day's runs
    runs = await created_runs(sim)
    assert sorted(runs) == ["eu", "us"]

    result = await sim.mod.slash(sim.staff, "event upcoming")
    assert result.ephemeral
    embed = result.response.embeds[0]
    assert (embed.title, embed.description) == ("Upcoming", UPCOMING_HELP)
    (field,) = embed.fields
    assert field.name == "Quiz night (quiz)"
    assert field.value.splitlines() == [
        f"cron '0 {hour} * * *' in UTC · reminders 1h, 15m before",
        *(
            line
            for scope in ("eu", "us")
            for line in (
                f"**{scope}** · {when(days[0])} · run `{runs[scope]}`",
                f"**{scope}** · {when(days[1])}",
                f"**{scope}** · {when(days[2])}",
            )
        ),
    ]


async def test_a_cancelled_occurrence_is_no_longer_upcoming(sim: Sim) -> None:
    """``/event cancel`` on a scheduled run (offered by autocomplete with its time in UTC): that
    day is gone from its scope's list (and not computed again), the other scope keeps it."""
    hour, days = daily_at(sim, 3)
    await sim.publish(quiz(hour))
    await sim.env.advance_time(2 * TICK)
    runs = await created_runs(sim)
    day = days[0]
    assert await sim.mod.autocomplete(sim.staff, "event cancel", "run", "eu") == [
        {
            "name": f"{runs['eu']} · Quiz night (eu) — scheduled for {day:%a} {day.day} {day:%b %Y %H}:00 UTC",
            "value": runs["eu"],
        }
    ], "the run to cancel is offered with its time, and the time with its zone"
    cancelled = await sim.mod.slash(sim.staff, "event cancel", run=runs["eu"], reason="no quizmaster")
    assert_responded(cancelled, content=f"✅ run {runs['eu']} cancelled: no quizmaster", ephemeral=True)

    field = (await sim.mod.slash(sim.staff, "event upcoming", event="quiz")).response.embeds[0].fields[0]
    lines = field.value.splitlines()[1:]
    assert lines[:3] == [
        f"**eu** · {when(day)}" for day in (days[1], days[2], days[2] + dt.timedelta(days=1))
    ]
    assert lines[3] == f"**us** · {when(days[0])} · run `{runs['us']}`"


async def test_upcoming_of_one_event_autocompletes_and_says_when_there_is_nothing_to_show(sim: Sim) -> None:
    """The event option autocompletes like ``/event start``'s; a manual event has no schedule;
    with no scheduled event published the reply says so; an unknown key is a short reply."""
    assert await sim.mod.autocomplete(sim.staff, "event upcoming", "event", "harb") == [
        {"name": "Harbour Raid (raid)", "value": "raid"}
    ]
    nothing = (await sim.mod.slash(sim.staff, "event upcoming")).response.embeds[0]
    assert (nothing.description, nothing.fields) == ("No scheduled events are published.", [])
    manual = (await sim.mod.slash(sim.staff, "event upcoming", event="raid")).response.embeds[0]
    assert [(f.name, f.value) for f in manual.fields] == [
        ("Harbour Raid (raid)", "No schedule: it starts only when staff start it.")
    ]
    unknown = await sim.mod.slash(sim.staff, "event upcoming", event="nope")
    assert_responded(unknown, content="no published event is called 'nope'", ephemeral=True)
    assert_error(sim.env, UnknownDefinition)


async def test_a_player_may_not_read_the_schedule_of_runs(sim: Sim) -> None:
    """Like every ``/event`` command it is for staff (it names runs to cancel); players have the
    server's Events tab."""
    result = await sim.player.slash(sim.general, "event upcoming")
    assert result.ephemeral
    assert "You need one of these roles" in result.response.content


async def test_upcoming_of_many_events_fits_discords_limits(sim: Sim) -> None:
    """30 events of 20 scopes each: 24 fields and a count of the rest, each field within 1,024
    characters with what did not fit counted, the whole embed within 6,000."""
    hour, _ = daily_at(sim, 5)
    for n in range(30):
        await sim.publish(quiz(hour, key=f"quiz-{n:02d}", scopes=[f"world-{s}" for s in range(20)]))
    embed = (await sim.mod.slash(sim.staff, "event upcoming")).response.embeds[0]
    assert len(embed.fields) == 25
    assert embed.fields[-1].value.startswith("6 more events")
    assert all(len(f.value) <= 1024 for f in embed.fields)
    for field in embed.fields[:-1]:
        head, first, *_, more = field.value.splitlines()
        assert head == f"cron '0 {hour} * * *' in UTC", "every event keeps its first lines"
        assert first.startswith("**world-0** · <t:")
        assert re.fullmatch(r"… and \d+ more", more), more
    assert len(embed) <= 6000


async def test_the_event_list_shows_each_events_next_occurrence(sim: Sim) -> None:
    """``/event list``: a scheduled event's line carries its next occurrence as Discord
    timestamps; a manual one none. A booked run counts as scheduled in the in-flight heading."""
    hour, days = daily_at(sim, 3)
    await sim.publish(quiz(hour, scopes=[]))
    listed = (await sim.mod.slash(sim.staff, "event list")).response.embeds[0]
    published, in_flight = listed.fields
    assert published.value.splitlines() == [
        f"`quiz` Quiz night — v1, cron '0 {hour} * * *' in UTC",
        f"  ↳ next {when(days[0])}",
        "`raid` Harbour Raid — v1, manual",
    ]
    assert in_flight.name == "In flight"
    await sim.env.advance_time(2 * TICK)
    in_flight = (await sim.mod.slash(sim.staff, "event list")).response.embeds[0].fields[1]
    assert in_flight.name == "In flight (1 scheduled, not started yet; 0 under way)"
