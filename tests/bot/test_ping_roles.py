"""Issue 8, defects 5 and 13 at the Discord delivery, driven through simcord: a ping names a
configured role alias or nothing is sent. Each test is named for the defect it pins."""

from __future__ import annotations

import pytest

from actions.delivery import Announcement, Cue, DeliveryError
from tests.bot.conftest import Sim


def announcement(ping_role: str | None) -> Announcement:
    return Announcement("announcements", "The raid begins!", None, ping_role, "c" * 40, 7, 9)


def cue(ping_role: str | None) -> Cue:
    return Cue(None, "Boss", "Spawn the boss", ping_role, "d" * 40, 7, 10)


async def test_defect_05_preflight_flags_a_cue_that_pings_a_raw_role_id(sim: Sim) -> None:
    """Before: a cue whose ``ping_role`` was a raw role id passed preflight and pinged that role
    (``Config.role_id`` took any digits), whatever the config said. Now preflight's check knows
    only the config's aliases: the raw id is a problem, the alias of the same role is not."""
    raw_id = str(sim.roles["gm"].id)
    assert await sim.bot.delivery.check(cue(raw_id)) == [
        f"ping role {raw_id!r} is not one of the role aliases in config (roles)"
    ]
    assert await sim.bot.delivery.check(cue("gm")) == []


@pytest.mark.parametrize("kind", ["announce", "cue"])
async def test_defect_13_a_ping_role_the_config_lacks_fails_the_step_not_posted_without_it(
    sim: Sim, kind: str
) -> None:
    """Before: an announcement whose ``ping_role`` the config did not know was posted without
    the ping (a log line at most), and the run carried on healthy; a cue's was dropped without
    a word. Now the delivery refuses it, terminal and naming the role, and posts nothing."""
    sent = len(sim.env.http_requests)
    with pytest.raises(DeliveryError) as refused:
        if kind == "announce":
            await sim.bot.delivery.announce(announcement("ghosts"))
        else:
            await sim.bot.delivery.post_cue(cue("ghosts"))
    assert refused.value.transient is False
    assert str(refused.value) == "ping role 'ghosts' is not one of the role aliases in config (roles)"
    assert len(sim.env.http_requests) == sent, "nothing was sent"


async def test_defect_05_a_delivered_cue_pings_only_its_configured_alias(sim: Sim) -> None:
    """The alias form still works end to end: the cue's content mentions the role and
    ``allowed_mentions`` names exactly that role."""
    posted = await sim.bot.delivery.post_cue(cue("gm"))
    assert posted.message_id
    request = sim.posts_to(sim.channels["gm_cues"])[-1]
    assert request.json["allowed_mentions"]["roles"] == [sim.roles["gm"].id]
