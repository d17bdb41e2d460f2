"""``/event``, driven as staff and players would drive it, against the real bot from
``create_bot`` on SQLite in simcord's simulated Discord. Each docstring names the promise the
test guards."""

from __future__ import annotations

import discord
import pytest
from simcord import assert_error, assert_responded

from bot.app import create_bot
from bot.errors import APOLOGY, BotError
from runner.errors import UnknownDefinition
from runner.views import list_runs
from tests.bot.conftest import Sim, buttons, make_config, raid_spec


async def test_a_staff_member_starts_an_event_and_players_see_the_announcement(sim: Sim) -> None:
    """The announcement goes to the channel the alias names, with the role ping and the embed,
    and ``allowed_mentions`` lets only the configured role ping: ``@everyone`` in the event text
    stays inert. It goes out at once (the start nudges the tick), not at the next interval."""
    players = sim.roles["players"]
    result = await sim.mod.slash(sim.staff, "event start", definition="raid")

    assert_responded(result, content="✅ started Harbour Raid as run 1", ephemeral=True)
    seen = sim.announcements.history(viewer=sim.player)
    assert len(seen) == 1
    message = seen[0]
    assert (
        message.content == f"{players.mention} @everyone The raid on the harbour begins! Meet at the docks."
    )
    assert message.raw_role_mentions == [players.id]
    assert message.mention_everyone is False, "@everyone in event text must not ping"
    embed = message.embeds[0]
    assert (embed.title, embed.description, embed.colour) == (
        "Harbour Raid",
        "Bring a boat.",
        discord.Colour(0xFF8800),
    )
    assert [(f.name, f.value, f.inline) for f in embed.fields] == [("Where", "The docks", True)]
    (request,) = sim.posts_to(sim.announcements)
    assert request.json["allowed_mentions"] == {"parse": [], "roles": [players.id]}
    assert sim.sandbox.history() == [], "a live run never posts in the sandbox"


async def test_allow_everyone_in_config_lets_at_everyone_ping(sim: Sim) -> None:
    """``announce.allow_everyone`` is the only switch that makes ``@everyone`` ping."""
    config = make_config(
        sim.guild,
        sim.channels,
        sim.roles,
        announce={"allowed_ping_roles": ["players"], "allow_everyone": True},
    )
    await sim.start_bot(config)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert sim.announcements.last_message.mention_everyone is True
    assert sim.posts_to(sim.announcements)[0].json["allowed_mentions"]["parse"] == ["everyone"]


CONTROLS = [
    ("event start", {"definition": "raid"}),
    ("event rehearse", {"definition": "raid"}),
    ("event pause", {"run": 1}),
    ("event resume", {"run": 1}),
    ("event cancel", {"run": 1, "reason": "because"}),
    ("event retry", {"run": 1}),
    ("event skip", {"run": 1, "step": 2}),
]


async def test_a_member_without_a_staff_role_is_refused_every_control(sim: Sim) -> None:
    """Every command is checked server-side against the roles in config (the client shows the
    commands to everyone): a player is refused each one, ephemerally, saying which roles may,
    and nothing changes. A GM (cue capability only) may read but not control runs."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    before = [m.id for m in sim.announcements.history()]
    for name, options in [*CONTROLS, ("event status", {}), ("event list", {})]:
        result = await sim.player.slash(sim.general, name, **options)
        assert result.ephemeral, name
        assert "You need one of these roles" in result.response.content, name
        assert "Nothing was done" in result.response.content, name
    for name, options in CONTROLS:
        result = await sim.gm.slash(sim.general, name, **options)
        assert "You need one of these roles" in result.response.content, name
    gm_reads = await sim.gm.slash(sim.staff, "event status", run=1)
    assert "Status: **running**" in gm_reads.response.embeds[0].description, "a GM may read"

    runs = await list_runs(sim.engine)
    assert [(r.id, r.status) for r in runs] == [(1, "running")], "no refused control acted"
    assert [m.id for m in sim.announcements.history()] == before
    assert await sim.player.autocomplete(sim.general, "event pause", "run", "") == []


async def test_interactions_from_another_guild_are_refused(sim: Sim) -> None:
    """A bot configured for one guild refuses commands and cue clicks from any other."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue = sim.gm_cues.last_message
    elsewhere = sim.config.model_copy(update={"guild_id": 222_222_222_222_222_222})
    await sim.start_bot(elsewhere)

    result = await sim.mod.slash(sim.staff, "event list")
    assert_responded(result, contains="only serves its own server", ephemeral=True)
    click = await sim.gm.click(cue, label="Confirm")
    assert click.acknowledged and click.ephemeral
    assert "only serves its own server" in click.response.content
    run = await sim.run(1)
    assert run.phases[0].steps[1].parked, "the refused click changed nothing"


async def test_preflight_problems_are_shown_and_start_only_on_confirm(sim: Sim) -> None:
    """Preflight calls every step with ``verify: true``: a channel where the bot may not send is
    reported to the staff member (naming the step, the channel and the permission) and nothing
    starts; "Start anyway" starts it, and the step then fails terminally, naming the channel."""
    bot_member = sim.bot.get_guild(sim.guild.id).me
    locked = sim.guild.create_text_channel(
        "locked", overwrites={bot_member: discord.PermissionOverwrite(send_messages=False)}
    )
    await sim.start_bot(make_config(sim.guild, sim.channels | {"locked": locked}, sim.roles))
    spec = raid_spec(key="locked-raid")
    spec["phases"][0]["steps"][0]["params"]["channel"] = "locked"
    await sim.publish(spec)

    result = await sim.mod.slash(sim.staff, "event start", definition="locked-raid")
    assert result.ephemeral
    embed = result.response.embeds[0]
    assert embed.title == "Preflight found 1 problem(s) in Harbour Raid"
    assert f"phase 'muster', 1st step: the bot is missing Send Messages in #locked ({locked.id})\n" in (
        embed.description or ""
    )
    assert [c["label"] for row in result.response.components for c in row["components"]] == ["Start anyway"]
    assert await list_runs(sim.engine) == [], "nothing starts while problems are unconfirmed"

    confirmed = await sim.mod.click(result.response, label="Start anyway")
    assert confirmed.acknowledged
    assert confirmed.followups[-1].content == "✅ started Harbour Raid as run 1"
    run = await sim.only_run()
    assert run.status == "paused"
    assert run.phases[0].steps[0].status == "failed"
    assert f"#locked ({locked.id}): missing Send Messages" in run.last_error
    log_lines = [m.content for m in sim.staff_log.history()]
    assert any(
        "paused after step 1 (Call to arms) failed" in line and "#locked" in line for line in log_lines
    )


async def test_start_without_problems_starts_at_once(sim: Sim) -> None:
    """No problems, no prompt: the event starts, and the answer is deferred first (the
    database may take longer than Discord's three seconds)."""
    result = await sim.mod.slash(sim.staff, "event start", definition="raid")
    (callback,) = [r for r in sim.env.http_requests if r.path.endswith("/callback")]
    assert callback.json == {"type": 5, "data": {"flags": 64}}, "deferred (thinking, ephemeral) first"
    assert result.response.embeds == [] and result.response.components == []
    assert len(sim.announcements.history()) == 1


async def test_a_rehearsal_plays_out_in_the_sandbox_with_waits_compressed(sim: Sim) -> None:
    """``/event rehearse`` runs the same event with every message in the staff sandbox, marked,
    with no pings, its waits compressed by ``rehearsal_speed``, and nothing in live channels."""
    result = await sim.mod.slash(sim.staff, "event rehearse", definition="raid")
    assert_responded(result, content="✅ started rehearsal of Harbour Raid as run 1", ephemeral=True)
    announcement, cue = sim.sandbox.history()
    assert announcement.content.startswith("[REHEARSAL] ")
    assert announcement.raw_role_mentions == [sim.roles["players"].id], "shown where it would ping"
    assert sim.posts_to(sim.sandbox)[0].json["allowed_mentions"] == {"parse": []}
    assert cue.embeds[0].footer.text.startswith("[REHEARSAL]")
    assert buttons(cue)[0][0] == "Confirm"

    await sim.gm.click(cue, label="Confirm")
    await sim.env.advance_time(1.5)  # the 60 s wait, at rehearsal_speed 60
    assert sim.sandbox.last_message.content == "[REHEARSAL] The harbour is ours!"
    assert (await sim.only_run()).status == "completed"
    assert sim.announcements.history() == [] and sim.gm_cues.history() == []


async def test_pause_stops_a_run_midway_and_resume_carries_on(sim: Sim) -> None:
    """A paused run sends nothing, however long it stays paused; resume carries on from where it
    stopped, at once."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")  # the 60 s wait begins
    result = await sim.mod.slash(sim.staff, "event pause", run=1)
    assert_responded(result, content="✅ run 1 paused", ephemeral=True)

    await sim.env.advance_time(120)  # twice the wait
    assert len(sim.announcements.history()) == 1, "nothing is sent while paused"
    assert (await sim.run(1)).status == "paused"

    again = await sim.mod.slash(sim.staff, "event pause", run=1)
    assert_responded(again, content="Nothing changed: the run is already paused.", ephemeral=True)
    result = await sim.mod.slash(sim.staff, "event resume", run=1)
    assert_responded(result, content="✅ run 1 resumed", ephemeral=True)
    assert sim.announcements.last_message.content == "The harbour is ours!"
    assert (await sim.run(1)).status == "completed"
    lines = [m.content for m in sim.staff_log.history()]
    assert any("paused by <@" in line for line in lines)
    assert any("resumed by <@" in line for line in lines)


async def test_cancel_edits_the_open_cue(sim: Sim) -> None:
    """Cancelling a run closes its open cue message: buttons disabled, who cancelled and why."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    result = await sim.mod.slash(sim.staff, "event cancel", run=1, reason="storm over the harbour")
    assert_responded(
        result, content="✅ run 1 cancelled: storm over the harbour (1 cue message updated)", ephemeral=True
    )
    cue = sim.gm_cues.last_message
    assert cue.content.startswith(f"⏹️ Cancelled by {sim.mod.mention} <t:")
    assert cue.content.endswith(": storm over the harbour")
    assert all(disabled for _, _, disabled in buttons(cue))
    assert cue.embeds[0].title == "Open the gates", "the cue's text stays readable"
    assert any("cancelled by" in m.content and "storm" in m.content for m in sim.staff_log.history())


async def test_retry_and_skip_answer_in_words_when_they_cannot_act(sim: Sim) -> None:
    """A refused or lost control is answered ephemerally, saying why; skip closes a cue."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    result = await sim.mod.slash(sim.staff, "event retry", run=1)
    assert_responded(
        result,
        content="Nothing changed: nothing to retry: the run has not stopped at a failed step.",
        ephemeral=True,
    )
    result = await sim.mod.slash(sim.staff, "event skip", run=1, step=2)
    assert_responded(result, content="✅ skipped (1 cue message updated)", ephemeral=True)
    assert sim.gm_cues.last_message.content.startswith(f"⏭️ Skipped by {sim.mod.mention}")
    result = await sim.mod.slash(sim.staff, "event skip", run=1, step=2)
    assert result.ephemeral and result.response.content.startswith("Nothing changed: ")
    result = await sim.mod.slash(sim.staff, "event pause", run=99)
    assert_responded(result, content="Nothing changed: cannot pause: no such run: 99.", ephemeral=True)


async def test_status_shows_phases_steps_due_times_and_health(sim: Sim) -> None:
    """The status embed lists every phase and step with its state, a due time as a Discord
    timestamp, who settled a cue, the run's status and health."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")

    result = await sim.mod.slash(sim.staff, "event status", run=1)
    embed = result.response.embeds[0]
    assert embed.title == "Harbour Raid · run 1"
    assert embed.description.splitlines()[0] == "Status: **running** · Health: **ok**"
    assert f"Started <t:{int(sim.env.now().timestamp())}:R> by {sim.mod.mention}" in embed.description
    muster, finale = embed.fields
    assert muster.name == "Muster"
    assert muster.value.splitlines() == [
        "✅ `1` Call to arms — done",
        f"✅ `2` Open the gates — done by {sim.gm.mention}",
    ]
    assert finale.name == "▶ Finale"
    due = int(sim.env.now().timestamp()) + 60
    assert finale.value.splitlines() == [
        "✅ `3` Let them fight — done",
        f"⏳ `4` Victory — pending, due <t:{due}:R>",
    ]
    assert embed.footer.text.startswith("raid · version ")

    # Without a run: the one run in flight.
    alone = await sim.mod.slash(sim.staff, "event status")
    assert alone.response.embeds[0].title == "Harbour Raid · run 1"


async def test_status_and_list_show_the_last_error_and_what_is_in_flight(sim: Sim) -> None:
    sim.env.inject_error("POST", f"/channels/{sim.announcements.id}/messages", status=503, times=1)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    embed = (await sim.mod.slash(sim.staff, "event status", run=1)).response.embeds[0]
    assert "Health: **degraded**" in embed.description
    assert "Discord answered 503" in embed.fields[0].value

    listed = (await sim.mod.slash(sim.staff, "event list")).response.embeds[0]
    assert listed.title == "Events"
    published, in_flight = listed.fields
    assert published.value.startswith("`raid` Harbour Raid — v1, manual")
    assert in_flight.value == "`1` Harbour Raid — running, degraded"


async def test_autocomplete_offers_definitions_runs_in_flight_and_open_steps(sim: Sim) -> None:
    assert await sim.mod.autocomplete(sim.staff, "event start", "definition", "harb") == [
        {"name": "Harbour Raid (raid)", "value": "raid"}
    ]
    assert await sim.mod.autocomplete(sim.staff, "event start", "definition", "zzz") == []
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert await sim.mod.autocomplete(sim.staff, "event pause", "run", "") == [
        {"name": "1 · Harbour Raid — running", "value": 1}
    ]
    assert await sim.mod.autocomplete(sim.staff, "event skip", "step", "", run=1) == [
        {"name": "2 · Open the gates — waiting for a GM", "value": 2}
    ]
    await sim.mod.slash(sim.staff, "event cancel", run=1, reason="done")
    assert await sim.mod.autocomplete(sim.staff, "event pause", "run", "") == [], "only runs in flight"
    assert await sim.mod.autocomplete(sim.staff, "event status", "run", "") == [
        {"name": "1 · Harbour Raid — cancelled", "value": 1}
    ]


async def test_a_user_facing_engine_error_becomes_a_short_ephemeral_reply(sim: Sim) -> None:
    """The error boundary: an engine error meant for people is answered as it is."""
    result = await sim.mod.slash(sim.staff, "event start", definition="nope")
    assert_responded(result, content="no published event is called 'nope'", ephemeral=True)
    assert_error(sim.env, UnknownDefinition)


async def test_rehearse_without_a_sandbox_is_refused(sim: Sim) -> None:
    await sim.start_bot(sim.config.model_copy(update={"sandbox_channel": None}))
    result = await sim.mod.slash(sim.staff, "event rehearse", definition="raid")
    assert_responded(result, contains="set sandbox_channel in the bot's config", ephemeral=True)
    assert_error(sim.env, BotError)
    assert await list_runs(sim.engine) == []


async def test_commands_are_synced_only_when_asked(sim: Sim) -> None:
    """Syncing is an explicit command (``python -m bot sync``), never ``on_ready`` (which runs on
    every reconnect and burns rate limits): a restarted bot registers no commands by itself."""
    puts = len([r for r in sim.env.http_requests if r.method == "PUT" and r.path.endswith("/commands")])
    await sim.env.restart_bot(create_bot(sim.config, sim.engine))
    assert sim.bot.is_ready()
    assert (
        len([r for r in sim.env.http_requests if r.method == "PUT" and r.path.endswith("/commands")]) == puts
    )
    assert "event start" in sim.mod.available_commands(sim.staff), "still there from the last explicit sync"


async def test_start_anyway_refuses_a_version_nobody_checked(sim: Sim) -> None:
    """ "Start anyway" pins the version preflight checked: republished since, it starts nothing."""
    spec = raid_spec(key="elsewhere")
    spec["phases"][0]["steps"][0]["params"]["channel"] = "nowhere"
    await sim.publish(spec)
    result = await sim.mod.slash(sim.staff, "event start", definition="elsewhere")
    assert "'nowhere' is not one of the channel aliases" in (result.response.embeds[0].description or "")

    await sim.publish({**spec, "title": "Harbour Raid, revised"})
    confirmed = await sim.mod.click(result.response, label="Start anyway")
    assert confirmed.followups[-1].content == (
        "elsewhere was republished after it was checked; run the command again to check the new version."
    )
    assert await list_runs(sim.engine) == []


async def test_anything_else_is_an_apology_and_a_logged_traceback(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The error boundary: a bug is never shown raw; the member gets an apology and the log gets
    the traceback with the interaction's ids."""

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("runner.views.list_definitions", broken)
    result = await sim.mod.slash(sim.staff, "event list")
    assert_responded(result, content=APOLOGY, ephemeral=True)
    (record,) = [r for r in caplog.records if r.name == "bot.errors"]
    assert record.exc_info is not None and record.command == "event list"  # type: ignore[attr-defined]
    assert_error(sim.env, RuntimeError)
