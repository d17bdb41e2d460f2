"""GM cues: the message, its Confirm / Skip buttons, who may press them, and what a press does,
through restarts and across processes."""

from __future__ import annotations

from bot.app import create_bot
from bot.cogs.cues._cog import CueButton
from bot.discord_delivery import DiscordDelivery
from runner.controls import Controls
from runner.history import Actor
from tests.bot.conftest import Sim, buttons
from wiring.services import assemble


async def test_a_cue_posts_with_two_buttons_and_only_a_gm_may_press_them(sim: Sim) -> None:
    """The cue goes to the GM channel with the event, phase and step, pings the GM role (and
    nobody else), and carries Confirm and Skip whose state is in the custom id. A player's or a
    moderator's press is refused ephemerally and changes nothing; a GM's Confirm settles the step,
    disables both buttons, says who confirmed and when, and the run moves on at once."""
    gm_role = sim.roles["gm"]
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue = sim.gm_cues.last_message
    assert cue.content == gm_role.mention
    assert cue.raw_role_mentions == [gm_role.id]
    assert sim.posts_to(sim.gm_cues)[0].json["allowed_mentions"] == {"parse": [], "roles": [gm_role.id]}
    embed = cue.embeds[0]
    assert (embed.author.name, embed.title, embed.description) == (
        "Harbour Raid",
        "Open the gates",
        "Open the harbour gates in game, then press Confirm.",
    )
    assert [(f.name, f.value) for f in embed.fields] == [
        ("Phase", "Muster"),
        ("Step", "step 2 (Open the gates)"),
    ]
    assert buttons(cue) == [("Confirm", "cue:2:confirm", False), ("Skip", "cue:2:skip", False)]

    for outsider in (sim.player, sim.mod):
        refused = await outsider.click(cue, label="Confirm")
        assert refused.acknowledged and refused.ephemeral
        assert refused.response.content.startswith("You need one of these roles to confirm or skip GM cues")
    assert sim.gm_cues.last_message.content == gm_role.mention, "a refused press edits nothing"
    assert (await sim.run(1)).phases[0].steps[1].parked

    pressed = await sim.gm.click(cue, label="Confirm")
    assert pressed.acknowledged and not pressed.ephemeral
    edited = sim.gm_cues.last_message
    assert edited.id == cue.id
    assert edited.content == f"✅ Confirmed by {sim.gm.mention} <t:{int(sim.env.now().timestamp())}:R>"
    assert buttons(edited) == [("Confirm", "cue:2:confirm", True), ("Skip", "cue:2:skip", True)]
    assert edited.embeds[0].title == "Open the gates"
    run = await sim.run(1)
    assert [s.status for s in run.phases[0].steps] == ["done", "done"]
    assert run.phases[1].steps[0].status == "done", "the wait after the cue ran at once (nudged)"
    assert run.phases[1].steps[1].status == "pending"


async def test_a_second_press_is_told_it_was_already_confirmed(sim: Sim) -> None:
    """A second press (here: the first press settled the cue but Discord refused to update its
    message, so the buttons still look live) is told, ephemerally, who confirmed it, changes
    nothing, and the message is brought up to date."""
    second_gm = sim.guild.add_member(sim.env.create_user("gm2"), roles=[sim.roles["gm"]])
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue = sim.gm_cues.last_message
    sim.env.inject_error("PATCH", "/webhooks/*/messages/@original", status=500, times=1)

    first = await sim.gm.click(cue, label="Confirm")
    assert first.followups[0].content == "Confirmed, but Discord did not let me update the message."
    assert buttons(sim.gm_cues.last_message)[0] == ("Confirm", "cue:2:confirm", False)
    second = await second_gm.click(sim.gm_cues.last_message, label="Confirm")
    assert second.followups[0].ephemeral
    assert second.followups[0].content == f"Nothing changed: already confirmed by {sim.gm.mention}."
    message = sim.gm_cues.last_message
    assert message.content == f"✅ Confirmed by {sim.gm.mention}"
    assert all(disabled for _, _, disabled in buttons(message))
    assert len(sim.announcements.history()) == 1, "the second press moved nothing"
    assert [s.status for s in (await sim.run(1)).phases[0].steps] == ["done", "done"]


async def test_a_press_on_a_cue_someone_else_settled_brings_the_message_up_to_date(sim: Sim) -> None:
    """A cue confirmed elsewhere (the CLI, another process) still shows live buttons; pressing
    one is answered with what happened and the message is corrected."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    controls = Controls(sim.engine)
    assert (await controls.confirm(2, actor=Actor("123456789012345678", "alice"))).ok

    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Skip")
    assert pressed.followups[0].content == "Nothing changed: already confirmed by <@123456789012345678>."
    message = sim.gm_cues.last_message
    assert message.content == "✅ Confirmed by <@123456789012345678>"
    assert all(disabled for _, _, disabled in buttons(message))


async def test_a_press_on_a_cue_of_a_cancelled_run_says_so(sim: Sim) -> None:
    """Cancelled where the message could not be edited (from the CLI): a GM's press is told the
    run was cancelled and the message is closed with the reason."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert (await Controls(sim.engine).cancel(1, reason="storm", actor=Actor(None, "cli"))).ok

    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert pressed.followups[0].ephemeral
    assert "cancelled" in pressed.followups[0].content
    message = sim.gm_cues.last_message
    assert message.content == "⏹️ Cancelled: cancelled by cli: storm"
    assert all(disabled for _, _, disabled in buttons(message))
    assert (await sim.run(1)).status == "cancelled"


async def test_a_press_after_a_restart_of_the_bot_still_works(sim: Sim) -> None:
    """The buttons carry their state in the custom id and are registered in ``setup_hook``: a
    cue posted by the previous process is confirmed by a freshly started one, which then sends
    the next steps (nothing was held in the old process's memory)."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    old = sim.bot
    await sim.start_bot()
    assert sim.bot is not old

    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert pressed.acknowledged
    assert sim.gm_cues.last_message.content.startswith(f"✅ Confirmed by {sim.gm.mention}")
    await sim.env.advance_time(61)
    assert sim.announcements.last_message.content == "The harbour is ours!"
    assert (await sim.run(1)).status == "completed"


async def test_a_press_handled_by_one_process_and_the_next_step_sent_by_another(sim: Sim) -> None:
    """Several processes share the database: the GM's press lands on process A, whose tick loop
    is stopped; process B (its own registry, runner and controls, nothing shared but the
    database and Discord) sends the next steps."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    sim.bot.ticker.loop.cancel()  # process A will not tick again
    await sim.env.settle()

    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert pressed.acknowledged
    process_b = assemble(
        sim.engine,
        lambda describe: DiscordDelivery(sim.bot, sim.config, describe),
        clock=sim.bot.clock,
        owner="process-b",
    )
    await process_b.runner.tick()
    run = await sim.run(1)
    assert run.phases[1].steps[0].status == "done", "B ran the wait A's click released"
    await sim.env.advance_time(61)
    assert len(sim.announcements.history()) == 1, "A no longer ticks"
    await process_b.runner.tick()
    assert sim.announcements.last_message.content == "The harbour is ours!"
    assert (await sim.run(1)).status == "completed"


async def test_a_skip_press_skips_the_cue(sim: Sim) -> None:
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Skip")
    assert pressed.acknowledged
    assert sim.gm_cues.last_message.content.startswith(f"⏭️ Skipped by {sim.gm.mention}")
    assert (await sim.run(1)).phases[0].steps[1].status == "skipped"


async def test_a_restarted_bot_without_the_buttons_registered_would_fail_silently(sim: Sim) -> None:
    """Guards the guard: discord.py drops a click whose DynamicItem is not registered without any
    error, so the restart test above is meaningful only because ``create_bot`` registers it."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")

    class Forgetful(type(sim.bot)):  # type: ignore[misc]
        async def setup_hook(self) -> None:
            await super().setup_hook()
            self.remove_dynamic_items(CueButton)

    await sim.env.restart_bot(Forgetful(sim.config, sim.engine))
    pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert pressed.acknowledged is False
    await sim.env.restart_bot(create_bot(sim.config, sim.engine))
