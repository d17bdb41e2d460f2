"""``signup.interested`` through the real bot in simcord: the members who marked a run's Discord
scheduled event Interested are signed up to that option after a poll, read 100 at a time,
capacity and the waiting list hold, the import is one way (a member who left is not signed up
again, taking the mark off removes nothing), nothing is imported once sign-ups close, and an
event without ``interested:`` never asks for the list."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
import simcord
from simcord.http import router

from bot.cogs.signups import _import as signup_import
from runner import catalog, signup_reads, signups
from runner.history import Actor
from runner.states import SignupImport, SignupStatus
from tests.bot.conftest import Sim
from tests.support.definitions import event, phase, wait

STARTS_IN = dt.timedelta(hours=3)
USERS_ROUTE = "guilds/{guild_id}/scheduled-events/{event_id}/users".split("/")


@pytest.fixture(autouse=True)
def discord_pages_the_interested_list() -> Iterator[None]:
    """simcord 3.2.1 answers ``GET .../scheduled-events/{e}/users`` with every subscriber at once,
    in no order, whatever ``limit``, ``after`` and ``with_member`` say. Discord answers at most
    ``limit`` (1 to 100) users with an id past ``after``, sorted by id, with their member only
    when ``with_member`` is true: simcord's own answer is cut to that here, so the bot's paging
    meets Discord's."""
    routes = router._ROUTES["GET"]
    index = next(i for i, (template, _) in enumerate(routes) if template == USERS_ROUTE)
    whole = routes[index][1]

    def paged(ctx: router.RequestContext) -> Any:
        limit = int(ctx.params.get("limit", 100))
        assert 1 <= limit <= 100, f"Discord refuses limit={limit}"
        after = int(ctx.params.get("after", 0))
        entries = sorted(whole(ctx), key=lambda entry: int(entry["user"]["id"]))
        if not int(ctx.params.get("with_member", 0)):
            entries = [{k: v for k, v in entry.items() if k != "member"} for entry in entries]
        return [entry for entry in entries if int(entry["user"]["id"]) > after][:limit]

    routes[index] = (USERS_ROUTE, paged)
    try:
        yield
    finally:
        routes[index] = (USERS_ROUTE, whole)


def import_spec(**signup: Any) -> dict[str, Any]:
    return event(
        "raid-night",
        phase("main", wait("1m")),
        title="Raid Night",
        duration="1h",
        discord_event={"location": "The docks"},
        signup={
            "channel": "announcements",
            "options": {"tank": 1, "dps": 2, "maybe": None},
            "closes": "1h",
            "interested": "maybe",
            **signup,
        },
    )


async def book(sim: Sim, spec: dict[str, Any], *, starts_in: dt.timedelta = STARTS_IN) -> tuple[int, Any]:
    """Publish the event and book a run; the mirror lists it in the Events tab. Answers the run
    and simcord's scheduled event."""
    with sim.env.time_context():
        await sim.publish(spec)
        async with sim.engine.begin() as conn:
            current = await catalog.current(conn, "raid-night", catalog.VersionCache())
            run_id = await catalog.create_run(
                conn, current, "", sim.now() + starts_in, sim.now(), actor=Actor(None, "test")
            )
    assert run_id is not None
    await sim.env.advance_time(6)
    [listed] = sim.env.backend.get_guild(sim.guild.id).scheduled_events.values()
    return run_id, listed


def users_requests(sim: Sim, listed: Any) -> list[simcord.HttpLogEntry]:
    return sim.requests("GET", f"/guilds/{sim.guild.id}/scheduled-events/{listed.id}/users")


async def next_poll(sim: Sim) -> None:
    """Past the poll interval: every run due is polled once."""
    await sim.env.advance_time(signup_import.POLL_SECONDS + 6)


async def signed_up(sim: Sim, run_id: int) -> dict[str, tuple[str, SignupStatus]]:
    found = await signups.listing(sim.engine, run_id)
    assert found is not None
    return {
        s.member_id: (option.name, s.status)
        for option in found.options
        for s in [*option.confirmed, *option.waitlisted]
    }


async def statuses(sim: Sim, run_id: int) -> dict[str, tuple[str, str]]:
    """Every sign-up row of the run, left ones too: member -> (option, status)."""
    async with sim.engine.connect() as conn:
        rows = await signups.sql.for_run(conn, run_id, with_cancelled=True)
    return {str(r["member_id"]): (str(r["option"]), str(r["status"])) for r in rows}


def fans(sim: Sim, count: int) -> list[simcord.MemberActor]:
    return [sim.guild.add_member(sim.env.create_user(f"fan{n}")) for n in range(count)]


async def test_members_marked_interested_are_signed_up_to_the_interested_option(sim: Sim) -> None:
    run_id, listed = await book(sim, import_spec())
    assert len(users_requests(sim, listed)) == 1, "polled when the listing was created"
    await sim.player.subscribe_event(listed)
    await sim.gm.subscribe_event(listed)
    await next_poll(sim)
    assert await signed_up(sim, run_id) == {
        str(sim.player.id): ("maybe", SignupStatus.CONFIRMED),
        str(sim.gm.id): ("maybe", SignupStatus.CONFIRMED),
    }
    assert await signup_reads.imported_members(sim.engine, run_id) == {
        str(sim.player.id): SignupImport.JOINED,
        str(sim.gm.id): SignupImport.JOINED,
    }
    [first, second] = users_requests(sim, listed)
    assert first.params == {"limit": 100, "with_member": 0} == second.params
    await sim.env.advance_time(6)
    shown = {f.name: f.value for f in sim.announcements.last_message.embeds[0].fields}
    assert shown["maybe (2)"].count("<@") == 2, "the message's list shows them"
    await sim.env.advance_time(60)
    assert len(users_requests(sim, listed)) == 2, "at most one poll per run every five minutes"


async def test_more_than_a_hundred_interested_members_are_read_in_pages_of_a_hundred(sim: Sim) -> None:
    run_id, listed = await book(sim, import_spec())
    crowd = fans(sim, 101)
    for fan in crowd:
        sim.env.backend.set_scheduled_event_subscription(sim.guild.id, listed.id, fan.id, True)
    before = len(users_requests(sim, listed))
    await next_poll(sim)
    assert set(await signed_up(sim, run_id)) == {str(fan.id) for fan in crowd}
    pages = users_requests(sim, listed)[before:]
    hundredth = sorted(fan.id for fan in crowd)[99]
    assert [page.params for page in pages] == [
        {"limit": 100, "with_member": 0},
        {"limit": 100, "with_member": 0, "after": hundredth},
    ]


async def test_a_full_option_puts_the_interested_on_its_waiting_list(sim: Sim) -> None:
    run_id, listed = await book(sim, import_spec(interested="dps"))
    crowd = fans(sim, 3)
    for fan in crowd:
        await fan.subscribe_event(listed)
    await next_poll(sim)
    found = await signups.listing(sim.engine, run_id)
    assert found is not None
    [dps] = [option for option in found.options if option.name == "dps"]
    assert [s.member_id for s in dps.confirmed] == [str(fan.id) for fan in crowd[:2]]
    assert [s.member_id for s in dps.waitlisted] == [str(crowd[2].id)]


async def test_the_import_is_one_way(sim: Sim) -> None:
    run_id, listed = await book(sim, import_spec())
    await sim.player.subscribe_event(listed)
    await sim.gm.subscribe_event(listed)
    await next_poll(sim)
    left = await sim.player.click(sim.announcements.last_message, label="Leave")
    assert left.response.content == "You are no longer signed up (maybe)."
    await sim.gm.unsubscribe_event(listed)
    await next_poll(sim)
    assert await statuses(sim, run_id) == {
        str(sim.player.id): ("maybe", SignupStatus.CANCELLED),
        str(sim.gm.id): ("maybe", SignupStatus.CONFIRMED),
    }, "the member who left stays out; taking the mark off removes nobody"


async def test_a_member_who_signed_up_by_click_is_left_where_they_are(sim: Sim) -> None:
    run_id, listed = await book(sim, import_spec())
    await sim.player.click(sim.announcements.last_message, label="tank")
    await sim.player.subscribe_event(listed)
    await next_poll(sim)
    assert await statuses(sim, run_id) == {str(sim.player.id): ("tank", SignupStatus.CONFIRMED)}
    assert await signup_reads.imported_members(sim.engine, run_id) == {}


async def test_a_member_without_the_allowed_role_is_skipped_once(sim: Sim) -> None:
    run_id, listed = await book(sim, import_spec(roles=["players"]))
    await sim.player.subscribe_event(listed)
    await sim.gm.subscribe_event(listed)
    await next_poll(sim)
    assert await statuses(sim, run_id) == {str(sim.player.id): ("maybe", SignupStatus.CONFIRMED)}
    assert await signup_reads.imported_members(sim.engine, run_id) == {
        str(sim.player.id): SignupImport.JOINED,
        str(sim.gm.id): SignupImport.NOT_ALLOWED_ROLE,
    }
    assert users_requests(sim, listed)[-1].params["with_member"] == 1, "the roles come with the list"


async def test_nothing_is_imported_once_sign_ups_close(sim: Sim) -> None:
    # Sign-ups close an hour before the start: 20 s after booking.
    run_id, listed = await book(sim, import_spec(), starts_in=dt.timedelta(hours=1, seconds=26))
    await sim.env.advance_time(30)
    asked = len(users_requests(sim, listed))
    await sim.player.subscribe_event(listed)
    await next_poll(sim)
    assert len(users_requests(sim, listed)) == asked, "the list is not asked for after closing"
    assert await statuses(sim, run_id) == {}


async def test_without_interested_the_list_is_never_asked_for(sim: Sim) -> None:
    spec = import_spec()
    del spec["signup"]["interested"]
    run_id, listed = await book(sim, spec)
    await sim.player.subscribe_event(listed)
    await next_poll(sim)
    assert users_requests(sim, listed) == []
    assert await statuses(sim, run_id) == {}


async def test_a_refused_list_is_logged_once_and_asked_for_again_at_the_next_poll(
    sim: Sim, caplog: pytest.LogCaptureFixture
) -> None:
    run_id, listed = await book(sim, import_spec())
    await sim.player.subscribe_event(listed)
    path = f"/guilds/{sim.guild.id}/scheduled-events/{listed.id}/users"
    sim.env.inject_error("GET", path, status=403, code=50001, message="Missing Access", times=2)
    await next_poll(sim)
    await next_poll(sim)
    assert await statuses(sim, run_id) == {}
    refusals = [r for r in caplog.records if "Discord refused the Interested list" in r.getMessage()]
    assert len(refusals) == 1, "logged once, not at every poll"
    await next_poll(sim)
    assert await statuses(sim, run_id) == {str(sim.player.id): ("maybe", SignupStatus.CONFIRMED)}


async def test_defect_a_deleted_discord_event_was_asked_for_its_users_until_sign_ups_closed(sim: Sim) -> None:
    """10070 Unknown Scheduled Event is final for that event: asked once, recorded (a restart does
    not ask again), staff told once; before, every poll until sign-ups closed asked again."""
    run_id, listed = await book(sim, import_spec())
    path = f"/guilds/{sim.guild.id}/scheduled-events/{listed.id}*"
    before = len(users_requests(sim, listed))
    sim.env.inject_error(
        "*", path, status=404, code=10070, message="Unknown Guild Scheduled Event", times=None
    )
    await next_poll(sim)
    asked = len(users_requests(sim, listed))
    assert asked == before + 1
    for _ in range(3):
        await next_poll(sim)
    with sim.env.time_context():
        await sim.start_bot()
    await next_poll(sim)
    assert len(users_requests(sim, listed)) == asked, "never asked again, restart or not"
    told = [m.content for m in sim.staff_log.history() if "Discord event was deleted" in m.content]
    assert len(told) == 1 and f"Run {run_id}" in told[0]
