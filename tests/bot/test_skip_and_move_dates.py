"""``/event skip-date`` and ``/event move-date`` (issue 28 item 2) through the real bot in
simcord: each publishes a new version carrying the exception, the run already booked for that
date is cancelled or moved (the same run, so its sign-ups and its sign-up message follow), the
staff log says so, and a member without the publish capability is refused with nothing changed.

The event runs daily in UTC at the hour three hours after the simulation's clock, so the
expected instants are worked out here with plain date arithmetic.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from simcord import assert_error

from runner import catalog
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim, make_config
from tests.bot.test_publish import PERMISSIONS
from tests.support.definitions import cron, event, phase, wait
from wiring.date_exceptions import DateRefused


def first_start(sim: Sim) -> dt.datetime:
    return (sim.now() + dt.timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)


def nightly(sim: Sim) -> dict[str, Any]:
    return event(
        "nightly",
        phase("main", wait("1m")),
        title="Nightly Raid",
        schedule={"cron": f"0 {first_start(sim).hour} * * *", "timezone": "UTC"},
        signup={"channel": "announcements", "options": {"tank": 1, "dps": 2}},
    )


async def booked(sim: Sim) -> int:
    """The bot restarted with ``publish`` granted to moderators, and tonight's run booked."""
    sim.config = make_config(sim.guild, sim.channels, sim.roles, permissions=PERMISSIONS)
    with sim.env.time_context():
        await sim.start_bot()
        await sim.publish(nightly(sim))
    await sim.env.advance_time(2 * TICK)  # the runner books the occurrence and posts its message
    runs = [r for r in await list_runs(sim.engine) if r.scheduled_for == first_start(sim)]
    assert len(runs) == 1 and sim.announcements.last_message is not None
    return runs[0].id


def staff_lines(sim: Sim) -> list[str]:
    return [line for m in sim.staff_log.history() if not m.embeds for line in m.content.splitlines()]


async def version(sim: Sim) -> int:
    async with sim.engine.connect() as conn:
        return (await catalog.current(conn, "nightly", catalog.VersionCache())).version_id


async def test_move_date_moves_the_booked_run_with_its_signup_message_and_tells_staff(sim: Sim) -> None:
    run_id = await booked(sim)
    start = first_start(sim)
    message = sim.announcements.last_message
    assert message is not None
    new_start = start + dt.timedelta(hours=2)

    result = await sim.mod.slash(
        sim.staff,
        "event move-date",
        event="nightly",
        date=f"{start:%Y-%m-%d}",
        to=f"{new_start:%Y-%m-%d %H:%M}",
    )
    assert result.ephemeral
    stamp = int(new_start.replace(tzinfo=dt.UTC).timestamp())
    assert f"now starts <t:{stamp}:F>" in result.response.content
    assert "(version 2)" in result.response.content
    assert len(result.response.content) <= 2000
    await sim.env.advance_time(3 * TICK)

    runs = [r for r in await list_runs(sim.engine) if r.scheduled_for.date() == start.date()]
    assert [(r.id, r.scheduled_for, r.status) for r in runs] == [(run_id, new_start, "scheduled")]
    edited = sim.announcements.history()
    assert any(f"<t:{stamp}:F>" in (m.embeds[0].description or "") for m in edited if m.embeds), (
        "the sign-up message shows the new start"
    )
    assert any(f"run {run_id}" in line and "now starts" in line for line in staff_lines(sim)), staff_lines(
        sim
    )


async def test_skip_date_cancels_the_booked_run_and_books_nothing_then(sim: Sim) -> None:
    run_id = await booked(sim)
    start = first_start(sim)
    result = await sim.mod.slash(sim.staff, "event skip-date", event="nightly", date=f"{start:%Y-%m-%d}")
    assert result.ephemeral and "is skipped on" in result.response.content
    await sim.env.advance_time(3 * TICK)
    runs = [r for r in await list_runs(sim.engine) if r.scheduled_for.date() == start.date()]
    assert [(r.id, r.status) for r in runs] == [(run_id, "cancelled")]
    message = sim.announcements.last_message
    assert message is not None and "**Cancelled**" in (message.embeds[0].description or ""), (
        "the sign-up message says the date is cancelled"
    )
    notices = [
        line
        for line in staff_lines(sim)
        if f"skipped Nightly Raid (nightly) on {start:%a} {start.date()}" in line
    ]
    assert len(notices) == 1 and f"<@{sim.mod.id}>" in notices[0], staff_lines(sim)


async def test_a_member_without_publish_is_refused_both_with_nothing_changed(sim: Sim) -> None:
    await booked(sim)
    before = await version(sim)
    day = f"{first_start(sim):%Y-%m-%d}"
    for name, options in [
        ("event skip-date", {"event": "nightly", "date": day}),
        ("event move-date", {"event": "nightly", "date": day, "to": f"{day} 23:00"}),
    ]:
        result = await sim.player.slash(sim.general, name, **options)
        assert result.ephemeral, name
        assert "You need one of these roles" in result.response.content, name
    assert await version(sim) == before
    assert {r.status for r in await list_runs(sim.engine)} == {"scheduled"}


async def test_a_date_without_an_occurrence_is_refused_naming_it(sim: Sim) -> None:
    await booked(sim)
    result = await sim.mod.slash(sim.staff, "event skip-date", event="nightly", date="next friday")
    assert result.ephemeral and "“next friday” is not a date: write it as" in result.response.content
    assert_error(sim.env, DateRefused)
    before = await version(sim)
    result = await sim.mod.slash(
        sim.staff, "event move-date", event="nightly", date="1999-01-01", to="1999-01-01 10:00"
    )
    assert "has already begun" in result.response.content
    assert_error(sim.env, DateRefused)
    assert await version(sim) == before


async def test_upcoming_shows_skipped_and_moved_dates(sim: Sim) -> None:
    """Dates to come, not booked yet: tomorrow skipped, the day after moved an hour later.
    ``/event upcoming`` lists the skipped one struck through and the moved one at its new time,
    saying where it was."""
    await booked(sim)
    start = first_start(sim)
    tomorrow, after = start + dt.timedelta(days=1), start + dt.timedelta(days=2)
    await sim.mod.slash(sim.staff, "event skip-date", event="nightly", date=f"{tomorrow:%Y-%m-%d}")
    later = after + dt.timedelta(hours=1)
    await sim.mod.slash(
        sim.staff, "event move-date", event="nightly", date=f"{after:%Y-%m-%d}", to=f"{later:%Y-%m-%d %H:%M}"
    )

    def stamp(moment: dt.datetime) -> str:
        return f"<t:{int(moment.replace(tzinfo=dt.UTC).timestamp())}:F>"

    result = await sim.mod.slash(sim.staff, "event upcoming", event="nightly")
    lines = result.response.embeds[0].fields[0].value.splitlines()
    assert f"~~{stamp(tomorrow)}~~ skipped" in lines, lines
    assert any(
        line.startswith(stamp(later)) and line.endswith(f"moved from {stamp(after)}") for line in lines
    ), lines


async def listed_today(sim: Sim) -> list[Any]:
    """The Events-tab mirror with an hour's horizon and ``publish`` for moderators; a daily quiz
    ten minutes after the simulation's start (midnight UTC), listed."""
    assert sim.env.now().time() == dt.time(0, 0)
    sim.config = make_config(
        sim.guild, sim.channels, sim.roles, permissions=PERMISSIONS, discord_events={"horizon": "1h"}
    )
    with sim.env.time_context():
        await sim.start_bot()
        await sim.publish(
            event(
                "nightly",
                phase("main", wait("1m")),
                title="Quiz",
                schedule=cron("10 0 * * *"),
                duration="1h",
                discord_event={"location": "The Lounge"},
            )
        )
    await sim.env.advance_time(2 * TICK)
    listed = list(sim.env.backend.get_guild(sim.guild.id).scheduled_events.values())
    assert len(listed) == 1
    return listed


async def test_move_date_moves_the_events_tab_listing(sim: Sim) -> None:
    [listed] = await listed_today(sim)
    today = sim.now().date()
    result = await sim.mod.slash(
        sim.staff, "event move-date", event="nightly", date=f"{today}", to=f"{today} 00:40"
    )
    assert "now starts" in result.response.content
    await sim.env.advance_time(3 * TICK)
    [still] = sim.env.backend.get_guild(sim.guild.id).scheduled_events.values()
    assert still.id == listed.id, "the same listing, edited"
    assert dt.datetime.fromisoformat(still.scheduled_start_time).time() == dt.time(0, 40)


async def test_skip_date_takes_the_listing_off_the_events_tab(sim: Sim) -> None:
    [listed] = await listed_today(sim)
    await sim.mod.slash(sim.staff, "event skip-date", event="nightly", date=f"{sim.now().date()}")
    await sim.env.advance_time(3 * TICK)
    left = [e for e in sim.env.backend.get_guild(sim.guild.id).scheduled_events.values() if e.id == listed.id]
    assert left == [] or left[0].status == 4, "deleted or cancelled"
