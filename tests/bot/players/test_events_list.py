"""``/events`` for players (issue 28, item 4), through the real bot in simcord (every request held
to Discord's OpenAPI description by the plugin): what is coming with Discord timestamps, open seats
and the member's own state; a member not signed up; 30 events in pages with Previous and Next;
Leave from ``/events mine`` freeing the seat and promoting the first member waiting exactly once,
the sign-up message following; the buttons answering after a restart; every reply within
Discord's limits."""

from __future__ import annotations

import datetime as dt
from typing import Any

from bot.cogs.players._render import NOTHING_MINE
from bridge import signup_messages
from runner import catalog
from runner.history import Actor
from tests.bot.conftest import Sim
from tests.bot.test_signups import book, field_values, message_of
from tests.support.definitions import event, phase, wait

STARTS_IN = dt.timedelta(hours=3)


def stamp(moment: dt.datetime, style: str) -> str:
    return f"<t:{int(moment.replace(tzinfo=dt.UTC).timestamp())}:{style}>"


def when(moment: dt.datetime) -> str:
    return f"{stamp(moment, 'f')} ({stamp(moment, 'R')})"


def fits(message: Any) -> None:
    """What Discord accepts of one message: the embed's limits, five rows of five buttons, each
    label within 80 characters."""
    assert len(message.content or "") <= 2000
    assert len(message.embeds) <= 10
    for embed in message.embeds:
        assert len(embed.description or "") <= 4096
        assert len(embed.title or "") <= 256
        assert len(embed) <= 6000
    rows = message.components
    assert len(rows) <= 5
    for row in rows:
        assert len(row.children) <= 5
        assert all(len(b.label or "") <= 80 and len(b.custom_id or "") <= 100 for b in row.children)


def lines(message: Any) -> list[str]:
    """The entries of an ``/events`` page: its description's numbered lines."""
    text = message.embeds[0].description or ""
    return [line for line in text.splitlines() if line[:1].isdigit()]


def labels(message: Any) -> list[tuple[str | None, bool]]:
    return [(b.label, b.disabled) for row in message.components for b in row.children]


async def slash(sim: Sim, member: Any, command: str) -> Any:
    result = await member.slash(sim.general, command)
    assert result.acknowledged and result.ephemeral, "about the member who asked: only they see it"
    message = result.response.message
    fits(message)
    return message


async def booked_at(sim: Sim, run_id: int) -> dt.datetime:
    return (await sim.run(run_id)).scheduled_for  # type: ignore[no-any-return]


async def book_plain(sim: Sim, count: int, *, title: str = "Event {n:02}", scope: str = "") -> None:
    """``count`` events booked by hand, one a minute from an hour on, without sign-ups."""
    scopes = {"scopes": [scope]} if scope else {}
    with sim.env.time_context():
        for n in range(1, count + 1):
            await sim.publish(
                event(f"ev-{n:02}", phase("main", wait("1m")), title=title.format(n=n), **scopes)
            )
            async with sim.engine.begin() as conn:
                current = await catalog.current(conn, f"ev-{n:02}", catalog.VersionCache())
                start = sim.now() + dt.timedelta(hours=1, minutes=n)
                await catalog.create_run(conn, current, scope, start, sim.now(), actor=Actor(None, "test"))


async def test_upcoming_lists_timestamps_open_seats_and_the_members_own_state(sim: Sim) -> None:
    """A player sees each booked run and each occurrence to come as a Discord timestamp (every
    reader in their own zone), the seats still open, and where they stand: seated in their option,
    or waiting with their place."""
    run_id = await book(sim)
    message = message_of(sim)
    await sim.player.click(message, label="tank")
    await sim.gm.click(message, label="tank")
    hour = (sim.now() + dt.timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)
    with sim.env.time_context():
        await sim.publish(
            event(
                "quiz",
                phase("main", wait("1m")),
                title="Quiz night",
                schedule={"cron": f"0 {hour.hour} * * *", "timezone": "UTC"},
                signup={"channel": "announcements", "options": {"going": 10}},
            )
        )
    at = await booked_at(sim, run_id)
    raid = f"1. **Raid Night** · {when(at)} · 2 seats open, 1 waiting"

    shown = lines(await slash(sim, sim.player, "events upcoming"))
    assert shown[0] == f"{raid} · ✅ you: seated (tank)"
    quiz = [f"**Quiz night** · {when(hour + dt.timedelta(days=d))} · 10 seats open" for d in range(3)]
    assert [line.split(". ", 1)[1] for line in shown[1:]] == [
        f"{q} (sign-ups open once it is booked) · you: not signed up" for q in quiz
    ], "the next three of a recurring event, not yet booked"

    assert lines(await slash(sim, sim.gm, "events upcoming"))[0] == f"{raid} · ⏳ you: waiting for tank (#1)"


async def test_a_member_not_signed_up_sees_every_seat_and_not_signed_up(sim: Sim) -> None:
    run_id = await book(sim)
    newcomer = sim.guild.add_member(sim.env.create_user("newcomer"))
    message = await slash(sim, newcomer, "events upcoming")
    at = await booked_at(sim, run_id)
    assert lines(message) == [f"1. **Raid Night** · {when(at)} · 3 seats open · you: not signed up"]
    assert message.embeds[0].title == "Coming up" and not message.components, "one page: no buttons"
    mine = await slash(sim, newcomer, "events mine")
    assert lines(mine) == [] and NOTHING_MINE in (mine.embeds[0].description or "")


async def test_thirty_events_are_pages_with_next_and_previous(sim: Sim) -> None:
    await book_plain(sim, 30)
    first = await slash(sim, sim.player, "events upcoming")
    assert [line.split(" · ")[0] for line in lines(first)] == [f"{n}. **Event {n:02}**" for n in range(1, 26)]
    assert first.embeds[0].footer.text == "Page 1 of 2 · 30 events"
    assert labels(first) == [("Previous", True), ("Next", False)]

    second = await sim.player.click(first, label="Next")
    assert second.acknowledged
    page = second.response.message
    fits(page)
    assert [line.split(" · ")[0] for line in lines(page)] == [f"{n}. **Event {n:02}**" for n in range(26, 31)]
    assert page.embeds[0].footer.text == "Page 2 of 2 · 30 events"
    assert labels(page) == [("Previous", False), ("Next", True)]

    back = (await sim.player.click(page, label="Previous")).response.message
    assert lines(back) == lines(first)


async def test_a_page_holds_fewer_entries_when_their_lines_would_pass_the_description_limit(sim: Sim) -> None:
    """Long titles and scopes: 25 lines would pass the embed's 4,096 characters, so a page holds
    fewer, and every entry is on exactly one page."""
    long_title = "The Very Long Name Of A Community Event Number {n:02} " + "x" * 40
    await book_plain(sim, 30, title=long_title, scope="the-northern-continent-of-the-old-world-server")
    message = await slash(sim, sim.player, "events upcoming")
    seen: list[str] = []
    while True:
        shown = lines(message)
        assert 0 < len(shown) < 25
        seen += [line.split(". ", 1)[0] for line in shown]
        if labels(message)[-1] == ("Next", True):
            break
        message = (await sim.player.click(message, label="Next")).response.message
        fits(message)
    assert seen == [str(n) for n in range(1, 31)]


async def test_leave_from_events_mine_frees_the_seat_and_promotes_the_first_waiting_once(sim: Sim) -> None:
    """Leave under ``/events mine`` is the sign-up message's Leave: the seat goes to the first
    member waiting, once, however many copies of the list the member presses it on, and the
    sign-up message shows it."""
    run_id = await book(sim)
    signup_message = message_of(sim)
    await sim.player.click(signup_message, label="tank")
    await sim.gm.click(signup_message, label="tank")
    at = await booked_at(sim, run_id)
    waiting = await slash(sim, sim.gm, "events mine")
    assert lines(waiting) == [
        f"1. **Raid Night** · {when(at)} · 2 seats open, 1 waiting · ⏳ you: waiting for tank (#1)"
    ]

    mine = await slash(sim, sim.player, "events mine")
    stale = await slash(sim, sim.player, "events mine")
    assert lines(mine) == [
        f"1. **Raid Night** · {when(at)} · 2 seats open, 1 waiting · ✅ you: seated (tank)"
    ]
    assert labels(mine) == [("Leave 1: Raid Night", False)]

    left = (await sim.player.click(mine, label="Leave 1: Raid Night")).response.message
    fits(left)
    description = left.embeds[0].description or ""
    assert description.startswith("**You are no longer signed up (tank).**")
    assert lines(left) == [] and NOTHING_MINE in description and not left.components
    again = (await sim.player.click(stale, label="Leave 1: Raid Night")).response.message
    assert (again.embeds[0].description or "").startswith("**You were not signed up.**")

    await sim.env.advance_time(6)
    assert field_values(sim.announcements.last_message)["tank (1/1)"] == f"<@{sim.gm.id}>"
    async with sim.engine.connect() as conn:
        notices = await signup_messages.sql.notices_for_run(conn, run_id)
    assert [n["member_id"] for n in notices] == [str(sim.gm.id)], "promoted exactly once"
    promoted = lines(await slash(sim, sim.gm, "events mine"))
    assert promoted == [f"1. **Raid Night** · {when(at)} · 2 seats open · ✅ you: seated (tank)"]


async def test_after_a_restart_the_page_buttons_and_leave_still_answer(sim: Sim) -> None:
    await book_plain(sim, 30)
    run_id = await book(sim)
    await sim.player.click(message_of(sim), label="dps")
    upcoming = await slash(sim, sim.player, "events upcoming")
    mine = await slash(sim, sim.player, "events mine")
    with sim.env.time_context():
        await sim.start_bot()

    page = (await sim.player.click(upcoming, label="Next")).response.message
    assert page.embeds[0].footer.text.startswith("Page 2 of 2")
    left = (await sim.player.click(mine, label="Leave 1: Raid Night")).response.message
    assert (left.embeds[0].description or "").startswith("**You are no longer signed up (dps).**")
    listed = await sim.run(run_id)
    assert listed.status == "scheduled"
    assert lines(await slash(sim, sim.player, "events mine")) == []


async def test_a_title_with_markdown_in_it_stays_a_title(sim: Sim) -> None:
    """A title like ``**VIP** raid_night`` is shown as written, not as bold text that swallows
    the rest of the line."""
    await book_plain(sim, 1, title="**VIP** raid_night")
    (line,) = lines(await slash(sim, sim.player, "events upcoming"))
    assert line.startswith(r"1. **\*\*VIP\*\* raid\_night** · ")
