"""One numbering for steps in Discord (issue 12): the cue card, ``/event status`` and a control's
answer name a step by its id, the number ``/event skip`` takes, with its label, as
``runner.views.step_name`` does; never by its place in its phase."""

from __future__ import annotations

import re

from runner.views import step_name
from tests.bot.conftest import Sim
from tests.support.definitions import announce, cue, event, phase

# The cue opens its phase (place 0) but is the event's third step: a card counting places
# would show another number than its footer and than /event skip takes.
GATES = event(
    "gates",
    phase(
        "muster",
        announce("Muster at the docks.", label="Call to arms"),
        announce("Bring a boat.", label="Boats"),
        label="Muster",
    ),
    phase(
        "harbour",
        cue("Open the harbour gates in game.", label="Open the gates", ping_role="gm"),
        announce("The gates are open!", "general", label="Gates open", on_failure="pause"),
        label="Harbour",
    ),
    title="Harbour Gates",
)


async def test_defect_the_cue_card_names_its_step_by_one_number(sim: Sim) -> None:
    """Before: the cue card's Step field said "1. Open the gates" (its place in its phase) while
    its footer said "run 1 · step 3" (its id): two numbers for one step. Now both carry the id,
    and it is the number ``/event skip`` acts on."""
    await sim.publish(GATES)
    await sim.mod.slash(sim.staff, "event start", definition="gates")
    run = await sim.run(1)
    gate = run.phases[1].steps[0]
    assert (gate.id, gate.seq) == (3, 0), "the id and the place in the phase differ"

    card = sim.gm_cues.last_message.embeds[0]
    fields = dict((f.name, f.value) for f in card.fields)
    assert fields["Step"] == step_name(3, "Open the gates") == "step 3 (Open the gates)"
    assert card.footer.text == "run 1 · step 3"
    numbers = {int(n) for n in re.findall(r"step (\d+)", f"{fields['Step']} {card.footer.text}")}
    assert numbers == {3}

    skipped = await sim.mod.slash(sim.staff, "event skip", run=1, step=3)
    assert skipped.response.content == "✅ skipped (1 cue message updated)"
    assert sim.gm_cues.last_message.content.startswith(f"⏭️ Skipped by {sim.mod.mention}")
    assert (await sim.run(1)).phases[1].steps[0].status == "skipped"


async def test_defect_the_status_embed_and_retry_name_a_failed_step_as_its_line_does(sim: Sim) -> None:
    """Before: a run paused by its step 4 ("Gates open") showed that step's line as
    "`4` Gates open" and, above it, "Last error: step 4 (discord.announce) failed: …", so the
    label in brackets read as another step. Now the last error names it "step 4 (Gates open)",
    and ``/event retry`` answers "retrying step 4 (Gates open) of run 1", as step_name names it."""
    await sim.publish(GATES)
    sim.env.inject_error(
        "POST",
        f"/channels/{sim.general.id}/messages",
        status=403,
        code=50001,
        message="Missing Access",
        times=1,
    )
    await sim.mod.slash(sim.staff, "event start", definition="gates")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    run = await sim.run(1)
    assert run.status == "paused"
    assert run.last_error.startswith("step 4 (discord.announce) failed: "), "the engine's own words"

    status = (await sim.mod.slash(sim.staff, "event status", run=1)).response.embeds[0]
    assert status.description is not None
    error = f"the bot may not post in #general ({sim.general.id}): Missing Access (Discord 50001)"
    assert f"Last error: {step_name(4, 'Gates open')} failed: {error}" in status.description
    harbour = next(f.value for f in status.fields if f.name.endswith("Harbour"))
    assert "❌ `4` Gates open — failed" in harbour
    assert "discord.announce" not in status.description

    retried = await sim.mod.slash(sim.staff, "event retry", run=1)
    assert retried.response.content == f"✅ retrying {step_name(4, 'Gates open')} of run 1"
    assert sim.general.last_message.content == "The gates are open!"
    assert (await sim.run(1)).status == "completed"
