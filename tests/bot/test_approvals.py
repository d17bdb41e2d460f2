"""Risk decides, through the real bot (issue 29 item 4): a destructive step waits on a card with
Approve and Skip in the staff log channel; a member without the ``approve`` capability is
refused and nothing changes; Approve makes the action run once; Skip means it never runs."""

from __future__ import annotations

import dataclasses
from typing import Any

import discord

from runner import catalog
from runner.definitions import EventDefinition
from runner.registry import Envelope
from tests.bot.conftest import TICK, Sim, buttons, make_config
from tests.bot.test_staff_log import log_lines, words
from tests.support.actions import build_action
from tests.support.definitions import event, phase, step, wait


class Arena:
    def __init__(self) -> None:
        self.wiped: list[str] = []

    async def wipe(self, envelope: Envelope, params: Any) -> dict[str, Any]:
        if envelope.verify:  # preflight checks every step before a start, acting on nothing
            return {"ok": True}
        self.wiped.append(envelope.idempotency_key)
        return {"ok": True}


async def finale(sim: Sim, *, approvers: bool = True) -> Arena:
    """The bot restarted with ``approve`` granted to moderators (unless not ``approvers``), and
    an event whose first step is destructive."""
    if approvers:
        permissions = {**sim.config.permissions, "approve": ["moderator"]}
        await sim.start_bot(make_config(sim.guild, sim.channels, sim.roles, permissions=permissions))
    arena = Arena()
    wipe = dataclasses.replace(
        build_action("arena.wipe", arena.wipe, label="Wipe the arena"), risk="destructive"
    )
    sim.bot.services.registry.register("arena", [wipe])
    spec = event(
        "finale",
        phase("end", step("arena.wipe", {"zone": "north"}, label="wipe the arena"), wait(3600)),
        title="Finale",
    )
    await catalog.publish(sim.engine, EventDefinition.model_validate(spec), sim.now())
    return arena


def the_card(sim: Sim) -> discord.Message:
    [card] = [m for m in sim.staff_log.history() if any("evappr:" in (b[1] or "") for b in buttons(m))]
    return card


async def started(sim: Sim) -> tuple[Arena, discord.Message, int]:
    arena = await finale(sim)
    await sim.mod.slash(sim.staff, "event start", definition="finale")
    await sim.env.advance_time(TICK)
    run = await sim.only_run()
    return arena, the_card(sim), run.phases[0].steps[0].id


async def test_a_destructive_step_waits_on_a_card_and_a_member_without_approve_is_refused(sim: Sim) -> None:
    arena, card, step_id = await started(sim)
    assert arena.wiped == [], "not performed before an approval"
    embed = card.embeds[0]
    assert embed.title == f"Approve step {step_id} (wipe the arena)?"
    assert "**Wipe the arena** (`arena.wipe`) is **destructive**" in (embed.description or "")
    assert ("Params", "zone: north") in [(f.name, f.value) for f in embed.fields]
    assert buttons(card) == [
        ("Approve", f"evappr:{step_id}:approve", False),
        ("Skip", f"evappr:{step_id}:skip", False),
    ]
    assert sim.posts_to(sim.staff_log)[0].json["allowed_mentions"] == {"parse": []}, "it pings nobody"
    run = await sim.only_run()
    status = await sim.mod.slash(sim.staff, "event status", run=run.id)
    embed = status.response.embeds[0]
    shown = " ".join([embed.description or "", *(f.value or "" for f in embed.fields)])
    assert "wipe the arena — waiting for staff approval" in shown, shown
    live = [
        m
        for m in sim.staff_log.history()
        if m.embeds and "Updated as the run moves" in (m.embeds[0].footer.text or "")
    ]
    said = " ".join(f.value or "" for f in live[-1].embeds[0].fields) + (live[-1].embeds[0].description or "")
    assert "Waiting for staff to approve" in said, said

    for outsider in (sim.gm, sim.player):
        refused = await outsider.click(card, label="Approve")
        assert refused.acknowledged and refused.ephemeral
        assert refused.response.content.startswith(
            "You need one of these roles to approve or skip risky steps"
        )
    await sim.env.advance_time(TICK)
    assert arena.wiped == [], "a refused press changes nothing"
    assert (await sim.only_run()).phases[0].steps[0].parked
    assert all(not disabled for _, _, disabled in buttons(the_card(sim)))


async def test_approve_runs_the_step_once_and_the_card_says_who(sim: Sim) -> None:
    arena, card, step_id = await started(sim)
    pressed = await sim.mod.click(card, label="Approve")
    assert pressed.acknowledged and not pressed.ephemeral
    edited = the_card(sim)
    assert edited.content == f"✅ Approved by {sim.mod.mention} <t:{int(sim.env.now().timestamp())}:R>"
    assert all(disabled for _, _, disabled in buttons(edited))
    await sim.env.advance_time(TICK * 2)
    assert len(arena.wiped) == 1
    assert (await sim.only_run()).phases[0].steps[0].status == "done"
    assert any("wipe the arena" in words(line) and "approved by" in line for line in log_lines(sim))
    live = [
        m
        for m in sim.staff_log.history()
        if m.embeds and "Updated as the run moves" in (m.embeds[0].footer.text or "")
    ]
    last_action = {f.name: f.value for f in live[-1].embeds[0].fields}["Last action"] or ""
    assert last_action.startswith(f"Approved step {step_id} (wipe the arena) by {sim.mod.mention}"), (
        last_action
    )


async def test_a_second_approve_is_told_who_approved_and_runs_nothing_again(sim: Sim) -> None:
    """The first press approved the step but Discord refused to update the card, so its buttons
    still look live: a second moderator's press is told who approved it, and the card is fixed."""
    second_mod = sim.guild.add_member(sim.env.create_user("mod2"), roles=[sim.roles["moderator"]])
    arena, card, _ = await started(sim)
    sim.env.inject_error("PATCH", "/webhooks/*/messages/@original", status=500, times=1)
    first = await sim.mod.click(card, label="Approve")
    assert first.followups[0].content == "Approved, but Discord did not let me update the message."
    await sim.env.advance_time(TICK)
    again = await second_mod.click(the_card(sim), label="Approve")
    assert again.followups[0].ephemeral
    assert again.followups[0].content == f"Nothing changed: already approved by {sim.mod.mention}."
    assert the_card(sim).content == f"✅ Approved by {sim.mod.mention}"
    await sim.env.advance_time(TICK * 2)
    assert len(arena.wiped) == 1, "a second Approve runs nothing again"


async def test_skip_on_the_card_means_the_step_never_runs(sim: Sim) -> None:
    arena, card, _ = await started(sim)
    pressed = await sim.mod.click(card, label="Skip")
    assert pressed.acknowledged and not pressed.ephemeral
    assert the_card(sim).content.startswith(f"⏭️ Skipped by {sim.mod.mention}")
    await sim.env.advance_time(TICK * 2)
    assert arena.wiped == []
    assert (await sim.only_run()).phases[0].steps[0].status == "skipped"


async def test_a_cancel_turns_the_cards_own_buttons_off_and_nothing_runs(sim: Sim) -> None:
    arena, _, step_id = await started(sim)
    run = await sim.only_run()
    await sim.mod.slash(sim.staff, "event cancel", run=run.id, reason="the arena is closed")
    edited = the_card(sim)
    assert edited.content.startswith(f"⏹️ Cancelled by {sim.mod.mention}")
    assert buttons(edited) == [
        ("Approve", f"evappr:{step_id}:approve", True),
        ("Skip", f"evappr:{step_id}:skip", True),
    ]
    await sim.env.advance_time(TICK * 2)
    assert arena.wiped == []


async def test_preflight_warns_when_a_step_will_wait_for_an_approval_nobody_may_give(sim: Sim) -> None:
    await finale(sim, approvers=False)
    result = await sim.mod.slash(sim.staff, "event start", definition="finale")
    assert result.ephemeral
    shown = result.response.embeds[0].description or ""
    assert (
        "phase 'end', 1st step: arena.wipe waits for a staff approval (approve_from: destructive), "
        "and no role may approve (set permissions.approve in the bot's config)"
    ) in shown, shown
    assert [c["label"] for row in result.response.components for c in row["components"]] == ["Start anyway"]
