"""The attendee role, through simcord and the real bot: never a bot staff role nor a role with a
permission beyond plain membership (refused at grant time against the live role, one staff-log
line), never taken from a member who held it before, and a role Discord will not let the bot
touch (deleted, refused) costs a bounded number of requests however long the run goes on."""

from __future__ import annotations

import datetime as dt
from typing import Any

import discord
import sqlalchemy as sa

from runner import catalog, signups
from runner.kinds import Actor
from runner.schema import attendee_grants
from tests.bot.conftest import Sim, make_config
from tests.support.definitions import event, phase, wait


def raid(attendee_role: str, *, minutes: int = 1) -> dict[str, Any]:
    return event(
        "raid-night",
        phase("main", wait(f"{minutes}m")),
        title="Raid Night",
        signup={"channel": "announcements", "options": ["going"], "attendee_role": attendee_role},
    )


async def book(sim: Sim, spec: dict[str, Any], starts_in: float) -> int:
    """Publish as a definition stored before this check existed would be (no config check), and
    book a run ``starts_in`` seconds from now; the loop posts its sign-up message."""
    await sim.publish(spec)
    async with sim.engine.begin() as conn:
        current = await catalog.current(conn, "raid-night", catalog.VersionCache())
        starts = sim.now() + dt.timedelta(seconds=starts_in)
        run_id = await catalog.create_run(conn, current, "", starts, sim.now(), actor=Actor(None, "test"))
    assert run_id is not None
    await sim.env.advance_time(6)
    return run_id


async def join(sim: Sim, run_id: int, member: Any) -> None:
    await signups.join(sim.engine, run_id, str(member.id), member.name, "going", (), sim.now())


def roles_of(sim: Sim, member: Any) -> set[int]:
    return set(sim.env.backend.get_member(sim.guild.id, member.id).role_ids)


def role_requests(sim: Sim, role_id: int) -> list[Any]:
    return [
        r for r in sim.env.http_requests if r.path.endswith(f"/roles/{role_id}") and "/members/" in r.path
    ]


def staff_lines(sim: Sim, text: str) -> list[str]:
    return [m.content for m in sim.staff_log.history() if text in (m.content or "")]


async def grants(sim: Sim) -> set[tuple[str, str]]:
    async with sim.engine.connect() as conn:
        rows = await conn.execute(sa.select(attendee_grants.c.role_id, attendee_grants.c.member_id))
        return {(str(r), str(m)) for r, m in rows}


async def with_raiders(sim: Sim, permissions: discord.Permissions | None = None) -> int:
    sim.roles["raiders"] = sim.guild.create_role("Raiders", permissions=permissions)
    sim.config = make_config(sim.guild, sim.channels, sim.roles)
    await sim.start_bot()
    return sim.roles["raiders"].id


async def test_defect_signup_role_escalation_a_member_who_clicks_is_not_made_a_moderator(sim: Sim) -> None:
    moderator = sim.roles["moderator"].id
    run_id = await book(sim, raid("moderator"), starts_in=3 * 3600)
    newbie = sim.guild.add_member(sim.env.create_user("newbie"))
    clicked = await newbie.click(sim.announcements.last_message, label="going")
    assert clicked.acknowledged
    await sim.env.advance_time(120)

    assert moderator not in roles_of(sim, newbie)
    assert role_requests(sim, moderator) == [], "no request for a staff role"
    refused = await newbie.slash(sim.staff, "event cancel", run=run_id, reason="mine now")
    assert "You need one of these roles" in (refused.response.content or ""), refused.response.content
    assert (await sim.run(run_id)).status == "scheduled"
    lines = staff_lines(
        sim, "is a bot staff role (permissions.control, permissions.rehearse, permissions.start)"
    )
    assert len(lines) == 1, [m.content for m in sim.staff_log.history()]


async def test_defect_signup_role_escalation_preflight_and_health_refuse_a_staff_role(sim: Sim) -> None:
    await sim.publish(raid("moderator"))
    result = await sim.mod.slash(sim.staff, "event start", definition="raid-night")
    text = result.response.embeds[0].description or ""
    assert "role 'moderator' is a bot staff role (permissions.control" in text, text
    health = await sim.mod.slash(sim.staff, "event health")
    assert "raid-night: role 'moderator' is a bot staff role" in (health.response.embeds[0].description or "")


async def test_defect_a_role_edited_after_publish_to_gain_a_permission_is_refused_at_grant_time(
    sim: Sim,
) -> None:
    raiders = await with_raiders(sim)
    run_id = await book(sim, raid("raiders"), starts_in=3 * 3600)
    await join(sim, run_id, sim.mod)
    await sim.env.advance_time(6)
    assert raiders in roles_of(sim, sim.mod)
    puts_before = [r for r in role_requests(sim, raiders) if r.method == "PUT"]
    backend = sim.env.backend
    backend.edit_role(sim.guild.id, raiders, {"permissions": discord.Permissions(manage_messages=True).value})
    await sim.env.settle()
    await join(sim, run_id, sim.player)
    await join(sim, run_id, sim.gm)
    await sim.env.advance_time(300)
    # Taking the role back is never refused for its permissions, and says nothing twice.
    await signups.leave(sim.engine, run_id, str(sim.mod.id), sim.mod.name, sim.now())
    await sim.env.advance_time(300)

    assert raiders not in roles_of(sim, sim.mod)
    assert raiders not in roles_of(sim, sim.player) and raiders not in roles_of(sim, sim.gm)
    assert [r for r in role_requests(sim, raiders) if r.method == "PUT"] == puts_before
    assert len(staff_lines(sim, "attendee role @Raiders carries Manage Messages")) == 1

    # Fixed by staff: the grants go ahead at the next pass.
    backend.edit_role(sim.guild.id, raiders, {"permissions": 0})
    await sim.env.advance_time(10)
    assert raiders in roles_of(sim, sim.player) and raiders in roles_of(sim, sim.gm)


async def test_a_member_who_held_the_attendee_role_before_signing_up_keeps_it_at_the_end(sim: Sim) -> None:
    raiders = await with_raiders(sim)
    sim.env.backend.add_member_role(sim.guild.id, sim.mod.id, raiders)
    run_id = await book(sim, raid("raiders"), starts_in=60)
    await join(sim, run_id, sim.mod)
    await join(sim, run_id, sim.player)
    await sim.env.advance_time(10)
    assert raiders in roles_of(sim, sim.player)

    await sim.env.advance_time(200)
    assert (await sim.run(run_id)).status == "completed"
    assert raiders in roles_of(sim, sim.mod), "theirs before the bot: kept"
    assert raiders not in roles_of(sim, sim.player), "the bot's: taken back"
    mod_path = f"/guilds/{sim.guild.id}/members/{sim.mod.id}/roles/{raiders}"
    assert [r.method for r in role_requests(sim, raiders) if r.path == mod_path] == []
    assert await grants(sim) == set()


async def test_defect_a_deleted_attendee_role_is_not_asked_about_again(sim: Sim) -> None:
    """Deleted by hand mid-run: nothing to take back, no request at all after the deletion (the
    bot used to ask once a minute for every holder without end)."""
    raiders = await with_raiders(sim)
    run_id = await book(sim, raid("raiders", minutes=5), starts_in=60)
    await join(sim, run_id, sim.player)
    await join(sim, run_id, sim.gm)
    await sim.env.advance_time(10)
    before = len(role_requests(sim, raiders))
    assert before == 2, "one grant each"

    sim.env.backend.delete_role(sim.guild.id, raiders)
    await sim.env.settle()
    await sim.env.advance_time(900)  # the run's end, and 10 minutes after it
    assert (await sim.run(run_id)).status == "completed"
    assert len(role_requests(sim, raiders)) == before
    assert await grants(sim) == set()
    assert len(staff_lines(sim, f"attendee role {raiders} no longer exists")) == 1


async def test_defect_a_role_deleted_unseen_is_asked_about_once_per_holder_then_never(sim: Sim) -> None:
    """The gateway missed the deletion: Discord's 10011 Unknown Role is final, so each holder's
    removal is asked once, recorded, and the staff told once."""
    raiders = await with_raiders(sim)
    run_id = await book(sim, raid("raiders", minutes=1), starts_in=60)
    await join(sim, run_id, sim.player)
    await join(sim, run_id, sim.gm)
    await sim.env.advance_time(10)
    del sim.env.backend.get_guild(sim.guild.id).roles[raiders]  # no GUILD_ROLE_DELETE
    await sim.env.advance_time(720)  # the run's end, and 10 minutes after it
    assert (await sim.run(run_id)).status == "completed"
    deletes = [r for r in role_requests(sim, raiders) if r.method == "DELETE"]
    assert len(deletes) == 2, "one per holder, never again"
    assert await grants(sim) == set()
    assert len(staff_lines(sim, "Discord refused to take back attendee role")) == 1


async def test_defect_a_role_moved_above_the_bots_unseen_is_refused_once_per_holder_then_never(
    sim: Sim,
) -> None:
    """403 Missing Permissions on a removal is final: asked once per holder, never every minute."""
    raiders = await with_raiders(sim)
    run_id = await book(sim, raid("raiders", minutes=1), starts_in=60)
    await join(sim, run_id, sim.player)
    await sim.env.advance_time(10)
    sim.env.backend.get_role(sim.guild.id, raiders).position = 99  # no GUILD_ROLE_UPDATE
    await sim.env.advance_time(720)  # the run's end, and 10 minutes after it
    deletes = [r for r in role_requests(sim, raiders) if r.method == "DELETE"]
    assert len(deletes) == 1
    assert raiders in roles_of(sim, sim.player)
    assert await grants(sim) == set()
    assert len(staff_lines(sim, "take it off by hand")) == 1
