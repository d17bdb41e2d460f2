"""The bot's shape as its buttons and commands see it: a button's permission is checked in its
``DynamicItem.interaction_check`` (the one refusal every command gives), so a refused press never
reaches the code that acts; and a control wakes the runner once, from the controls alone."""

from __future__ import annotations

import sys

import discord
import pytest

from bot.cogs.control._preflight import ALL_SCOPES
from runner.views import list_runs
from tests.bot.conftest import Sim, raid_spec

NEEDS_GM = "You need one of these roles to confirm or skip GM cues"


@pytest.fixture
def pressed(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The custom ids of the presses that reached a button's callback."""
    calls: list[str] = []
    # ``load_extension`` executes an extension's module afresh for each bot: the classes the
    # running bot registered are the ones in ``sys.modules`` now, not the ones imported above.
    for module, name in (("bot.cogs.cues._cog", "CueButton"), ("bot.cogs.control._cog", "StartAnyway")):
        item = getattr(sys.modules[module], name)
        assert sim.bot.extensions[module] is sys.modules[module]
        original = item.callback

        async def recorded(
            self: discord.ui.DynamicItem, interaction: discord.Interaction, _o=original
        ) -> None:  # type: ignore[type-arg]
            calls.append(str(self.custom_id))
            await _o(self, interaction)

        monkeypatch.setattr(item, "callback", recorded)
    return calls


async def test_a_refused_cue_press_is_answered_by_the_check_and_never_reaches_the_callback(
    sim: Sim, pressed: list[str]
) -> None:
    """The cue button's refusal was written inside its click handler (a second copy of the tree's,
    answered with ``send_message`` of its own). Now ``CueButton.interaction_check`` refuses with
    the tree's own refusal: the same ephemeral words, nothing changed, and the press never reaches
    the callback; a GM's press does."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue = sim.gm_cues.last_message
    for outsider in (sim.player, sim.mod):
        refused = await outsider.click(cue, label="Confirm")
        assert refused.acknowledged and refused.ephemeral
        assert refused.response.content.startswith(NEEDS_GM)
    assert pressed == [], "a refused press never reaches the callback"
    assert (await sim.run(1)).phases[0].steps[1].parked, "and changes nothing"

    confirmed = await sim.gm.click(cue, label="Confirm")
    assert confirmed.acknowledged and not confirmed.ephemeral
    assert pressed == ["cue:2:confirm"]


async def test_a_refused_start_anyway_is_answered_by_the_check_and_starts_nothing(
    sim: Sim, pressed: list[str]
) -> None:
    """The same for "Start anyway" (its refusal was a third copy): a member who may not start
    events (a GM) pressing one is refused by ``StartAnyway.interaction_check`` in the words
    ``/event start`` itself uses, the press never reaches the callback, and nothing starts."""
    published = await sim.publish(raid_spec(title="Harbour Raid, revised"))
    view = discord.ui.View(timeout=None)
    # The running bot's own class (see ``pressed``): posting a view registers its item's class.
    start_anyway = sys.modules["bot.cogs.control._cog"].StartAnyway
    view.add_item(start_anyway("raid", published.version_id, ALL_SCOPES, "l"))
    channel = sim.bot.get_channel(sim.staff.id)
    assert isinstance(channel, discord.TextChannel)
    await channel.send("Preflight found problems", view=view)
    await sim.env.settle()
    as_command = await sim.gm.slash(sim.staff, "event start", definition="raid")

    refused = await sim.gm.click(sim.staff.last_message, label="Start anyway")
    assert refused.acknowledged and refused.ephemeral
    assert refused.response.content == as_command.response.content
    assert refused.response.content.startswith("You need one of these roles to start events")
    assert pressed == []
    assert await list_runs(sim.engine) == [], "nothing started"

    started = await sim.mod.click(sim.staff.last_message, label="Start anyway")
    assert started.followups[-1].content == "✅ started Harbour Raid, revised as run 1"
    assert pressed == [f"evstart:raid:{published.version_id}:*:l"]


async def test_a_control_wakes_the_runner_once(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    """The controls woke the runner (``RunsChanged`` on the bus) and the cog nudged it
    again after every successful command, so each start, resume or cancel ticked twice. Now the
    controls alone decide: one nudge per change that gives the runner work, none for a refused
    control or a pause. A start wakes nothing either: the bot's runner drives the run it was
    handed at once (``Controls(driver=)``)."""
    ticker = sim.bot.ticker
    assert ticker is not None
    nudges: list[str] = []
    original = ticker.loop.wake
    monkeypatch.setattr(ticker.loop, "wake", lambda: (nudges.append("nudge"), original())[1])

    await sim.mod.slash(sim.staff, "event start", definition="raid")
    assert len(nudges) == 0, "the start is handed to the runner, not left for a tick"
    assert sim.announcements.history(), "and the run went out at once"
    await sim.mod.slash(sim.staff, "event resume", run=1)  # refused: the run is not paused
    assert len(nudges) == 0, "nothing changed, nothing to wake"
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    assert len(nudges) == 1, "the confirm"
    await sim.mod.slash(sim.staff, "event pause", run=1)
    assert len(nudges) == 1, "a pause leaves the runner nothing to do (the controls' own rule)"
    await sim.mod.slash(sim.staff, "event resume", run=1)
    assert len(nudges) == 2, "the resume"
    await sim.mod.slash(sim.staff, "event cancel", run=1, reason="storm")
    assert len(nudges) == 3, "the cancel"
