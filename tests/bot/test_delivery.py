"""The Discord delivery: at most once per step (the nonce), errors classified so the runner
retries what may pass and stops on what will not, naming the channel and what is missing."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from actions.delivery import Announcement, Cue, DeliveryError
from bot.discord_delivery import DiscordDelivery
from bot.discord_messages import nonce_for
from runner.schema import steps
from runner.views import StepContext
from tests.bot.conftest import Sim, make_config


async def idempotency_key(sim: Sim, step_id: int) -> str:
    async with sim.engine.connect() as conn:
        query = sa.select(steps.c.idempotency_key).where(steps.c.id == step_id)
        return (await conn.execute(query)).scalar_one()


def test_the_nonce_is_the_first_25_characters_of_the_key() -> None:
    key = "0123456789abcdef0123456789abcdef01234567"
    assert nonce_for(key) == "0123456789abcdef012345678"
    assert len(nonce_for(key)) == 25


async def test_a_500_on_an_announcement_is_retried_with_the_same_nonce(
    sim: Sim, caplog: pytest.LogCaptureFixture
) -> None:
    """A 5xx is transient: the step is retried after the runner's retry delay with the same
    nonce (and ``enforce_nonce``), so had the first attempt reached the channel, Discord would
    return that message instead of posting a second. The failure is logged once with the run and
    step ids, the run is marked degraded, and the staff log says so."""
    caplog.set_level(logging.WARNING, logger="bot")
    sim.env.inject_error("POST", f"/channels/{sim.announcements.id}/messages", status=500, times=1)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert sim.announcements.history() == []
    run = await sim.run(1)
    assert run.health == "degraded"
    assert run.phases[0].steps[0].status == "pending"

    await sim.env.advance_time(30)
    assert len(sim.announcements.history()) == 1
    first, second = sim.posts_to(sim.announcements)
    key = await idempotency_key(sim, 1)
    assert first.json["nonce"] == second.json["nonce"] == key[:25]
    assert len(first.json["nonce"]) <= 25
    assert first.json["enforce_nonce"] is second.json["enforce_nonce"] is True
    assert first.json["content"] == second.json["content"]

    failures = [r for r in caplog.records if r.name == "bot.discord_delivery"]
    assert len(failures) == 1
    assert (failures[0].run_id, failures[0].step_id) == (1, 1)  # type: ignore[attr-defined]
    assert "transient failure: Discord answered 500" in failures[0].getMessage()
    assert any("is degraded" in m.content for m in sim.staff_log.history())


@pytest.mark.parametrize(
    ("status", "code", "text", "expected"),
    [
        (
            403,
            50001,
            "Missing Access",
            "the bot may not post in #announcements ({id}): Missing Access (Discord 50001)",
        ),
        (
            404,
            10003,
            "Unknown Channel",
            "#announcements ({id}) no longer exists (Discord 10003: Unknown Channel)",
        ),
        (
            400,
            50035,
            "Invalid Form Body",
            "Discord answered 400 (code 50035) posting in #announcements ({id})",
        ),
    ],
)
async def test_a_refusal_fails_the_step_at_once_naming_the_channel(
    sim: Sim, status: int, code: int, text: str, expected: str
) -> None:
    """403, 404 and any other 4xx are terminal: no retry, the step fails with the channel named,
    and the step's ``on_failure: pause`` pauses the run for staff."""
    sim.env.inject_error(
        "POST", f"/channels/{sim.announcements.id}/messages", status=status, code=code, message=text, times=1
    )
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    run = await sim.run(1)
    step = run.phases[0].steps[0]
    assert step.status == "failed"
    assert step.attempts == 1, "not retried"
    assert expected.format(id=sim.announcements.id) in step.last_error
    assert run.status == "paused"
    assert len(sim.posts_to(sim.announcements)) == 1


async def test_a_403_from_missing_permissions_names_the_permission(sim: Sim) -> None:
    """A real permission refusal (no injection: the bot's Send Messages is denied on the
    channel) names the permission the bot lacks."""
    me = sim.bot.get_guild(sim.guild.id).me
    await sim.bot.get_channel(sim.announcements.id).set_permissions(me, send_messages=False)
    await sim.env.settle()
    announcement = Announcement(
        channel="announcements",
        content="hello",
        embed=None,
        ping_role=None,
        idempotency_key="f" * 40,
        run_id=7,
        step_id=9,
    )
    with pytest.raises(DeliveryError) as caught:
        await sim.bot.delivery.announce(announcement)
    assert caught.value.transient is False
    assert str(caught.value) == (
        f"the bot may not post in #announcements ({sim.announcements.id}): missing Send Messages (Discord 50013)"
    )


@pytest.mark.parametrize("status", [429, 502, 503])
async def test_rate_limits_and_server_errors_are_transient(sim: Sim, status: int) -> None:
    sim.env.inject_error("POST", f"/channels/{sim.announcements.id}/messages", status=status, times=1)
    with pytest.raises(DeliveryError) as caught:
        await sim.bot.delivery.announce(_announcement())
    assert caught.value.transient is True


@pytest.mark.parametrize("error", [TimeoutError("read timed out"), ConnectionResetError("reset by peer")])
async def test_timeouts_and_dropped_connections_are_transient(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """Nothing answered: the message may or may not have gone out, so retry (the nonce makes a
    repeat harmless)."""

    async def no_answer(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(sim.bot.http, "send_message", no_answer)
    with pytest.raises(DeliveryError) as caught:
        await sim.bot.delivery.announce(_announcement())
    assert caught.value.transient is True
    assert f"no answer from Discord posting in #announcements ({sim.announcements.id})" in str(caught.value)


def _announcement(**overrides: object) -> Announcement:
    fields: dict[str, object] = {
        "channel": "announcements",
        "content": "hello",
        "embed": None,
        "ping_role": None,
        "idempotency_key": "a" * 40,
        "run_id": 1,
        "step_id": 1,
    }
    fields.update(overrides)
    return Announcement(**fields)  # type: ignore[arg-type]


def _context(rehearsal: bool) -> StepContext:
    return StepContext("raid", "Harbour Raid", "muster", "Muster", 0, "Call to arms", "", rehearsal)


async def test_a_rehearsal_without_a_sandbox_posts_nowhere(sim: Sim) -> None:
    """A rehearsal's messages go to the sandbox or nowhere: never to a live channel."""
    delivery = DiscordDelivery(sim.bot, sim.config.model_copy(update={"sandbox_channel": None}))
    with pytest.raises(DeliveryError, match="sandbox_channel is not configured") as caught:
        await delivery.announce(_announcement(context=_context(rehearsal=True)))
    assert caught.value.transient is False
    assert sim.posts_to(sim.announcements) == []


async def test_unknown_aliases_and_channels_of_other_servers_are_refused(sim: Sim) -> None:
    other = sim.env.create_guild("Elsewhere").create_text_channel("news")
    config = sim.config.model_copy(update={"channels": {**sim.config.channels, "news": other.id}})
    delivery = DiscordDelivery(sim.bot, config)
    with pytest.raises(DeliveryError, match="'nowhere' is not one of the channel aliases"):
        await delivery.announce(_announcement(channel="nowhere"))
    with pytest.raises(DeliveryError, match=rf"#news \({other.id}\) is not in this bot's server"):
        await delivery.announce(_announcement(channel="news"))
    with pytest.raises(DeliveryError, match="does not exist"):
        await delivery.announce(_announcement(channel="123456789012345678"))


async def test_check_reports_what_a_delivery_would_hit_without_sending(sim: Sim) -> None:
    """Preflight's ``verify``: the ping role must be one announcements may ping and must be able
    to notify; the GM channel must exist; nothing is sent."""
    me = sim.bot.get_guild(sim.guild.id).me
    await sim.bot.get_channel(sim.general.id).set_permissions(me, mention_everyone=False)
    quiet = sim.guild.create_role("Quiet")  # not mentionable
    config = make_config(
        sim.guild,
        sim.channels,
        {**sim.roles, "quiet": quiet},
        gm_channel=None,
        announce={"allowed_ping_roles": ["players", "quiet"]},
    )
    await sim.env.settle()
    delivery = DiscordDelivery(sim.bot, config)
    sent = len(sim.env.http_requests)

    assert await delivery.check(_announcement(ping_role="players")) == []
    assert await delivery.check(_announcement(ping_role="gm")) == [
        "announcements may not ping role 'gm': add it to announce.allowed_ping_roles, or the mention stays inert"
    ]
    assert await delivery.check(_announcement(channel="general", ping_role="quiet")) == [
        f"role @Quiet is not mentionable and the bot is missing Mention @everyone, @here and All Roles "
        f"in #general ({sim.general.id}): the ping would not notify"
    ]
    cue = Cue(None, "t", "i", None, "b" * 40, 1, 1)
    assert await delivery.check(cue) == [
        "no GM channel: the step names none and gm_channel is not configured"
    ]
    assert len(sim.env.http_requests) == sent, "check sends nothing"


async def test_a_ping_config_does_not_allow_is_posted_inert(sim: Sim) -> None:
    """Started anyway: the mention is shown but ``allowed_mentions`` does not let it ping."""
    posted = await sim.bot.delivery.announce(_announcement(ping_role="gm"))
    message = await sim.bot.get_channel(sim.announcements.id).fetch_message(int(posted.message_id))
    assert message.content == f"{sim.roles['gm'].mention} hello"
    # simcord parses role mentions without applying allowed_mentions to them, so the policy is
    # checked where Discord applies it: the request body, which names only the allowed role.
    assert sim.posts_to(sim.announcements)[-1].json["allowed_mentions"] == {
        "parse": [],
        "roles": [sim.roles["players"].id],
    }
