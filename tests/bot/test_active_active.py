"""Two bot processes, active-active, on one database and one bot token: every interaction is
answered once, by the process that claimed it and acted; the work one process does at a time
moves on a clean stop at once and on a death after its lease. How the two processes are
simulated, and what that does not cover, is in ``tests/bot/two_processes.py``."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from pathlib import Path

import pytest
import yaml

from bot.app import EventBot
from bot.claims import UNCLAIMED_ANSWER_AFTER, claim_key
from bot.errors import DATABASE_DOWN
from bot.work_lease import LEASE_PASSES
from bridge.exclusive import ExternalClaims
from cli.serve import until_stopped
from runner.db import create_engine
from tests.bot.conftest import TICK, make_config, raid_spec
from tests.bot.two_processes import (
    PACE,
    PUBLISHERS,
    Pair,
    Timing,
    assert_each_once,
    claims,
    drill,
    handled_once,
    last_answer,
    lease_owners,
    owner,
    staff_lines,
)


@pytest.mark.slow
async def test_defect_a_confirm_delivered_to_both_processes_is_answered_once_never_already_confirmed(
    pair: Pair, timing: Timing
) -> None:
    """100 Confirms, each delivered to both processes: every one is acknowledged exactly once, by
    the process that claimed it and acted (the run moves one step per press), the other making
    no request about it; the acknowledgement takes a small part of Discord's 3 s."""
    sim = pair.sim
    # The trials are about the presses: no staff log or live messages to wait for.
    a = await sim.start_bot(sim.config.model_copy(update={"staff_log_channel": None}))
    b = await pair.join("process-b", sim.bot.config)
    await sim.publish(drill(100))
    await sim.mod.slash(sim.staff, "event start", definition="drill")
    winners: list[EventBot] = []
    acks: list[float] = []
    order = random.Random(13)
    for trial in range(100):
        pair.hears_first(order.choice((a, b)))
        pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
        assert pressed.acknowledged and not pressed.ephemeral, trial
        assert not pressed.followups, f"trial {trial}: {[m.content for m in pressed.followups]}"
        winner, ack = await handled_once(pair, timing, (a, b))
        winners.append(winner)
        acks.append(ack)
        # A GM's pace: the channels' budgets (5 messages per 5 s) never make a post wait.
        await sim.env.advance_time(PACE)
    run = await sim.only_run()
    assert [s.status for s in run.phases[0].steps] == ["done"] * 100
    assert run.status == "completed"
    assert a.interaction_gate.won + b.interaction_gate.won == 101, "100 presses and the start"
    assert a.interaction_gate.lost + b.interaction_gate.lost == 101
    assert max(acks) < 1.0, f"slowest acknowledgement {max(acks):.3f} s"
    assert winners.count(a) > 10 and winners.count(b) > 10, "each process won some"
    print(
        f"\ncue confirm: acknowledged in {sorted(acks)[50] * 1000:.1f} ms median, {max(acks) * 1000:.1f} ms max; "
        f"won by a {winners.count(a)}, b {winners.count(b)}"
    )


@pytest.mark.slow
async def test_a_slash_command_delivered_to_both_processes_is_answered_once_in_100_of_100_trials(
    pair: Pair, timing: Timing
) -> None:
    """``/event pause`` and ``/event resume``, 50 each, alternating: each acknowledged once, by
    the process that acted; none is answered "already paused", and the staff log (held by one
    process) has each pause and resume once."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    acks = []
    winners = []
    order = random.Random(17)
    for trial in range(100):
        pair.hears_first(order.choice((a, b)))
        verb = "pause" if trial % 2 == 0 else "resume"
        answered = await sim.mod.slash(sim.staff, f"event {verb}", run=1)
        assert answered.acknowledged, trial
        winner, ack = await handled_once(pair, timing, (a, b))
        acks.append(ack)
        winners.append(winner)
        [reply] = answered.followups or [answered.response]
        assert "Nothing changed" not in reply.content, (trial, reply.content)
        await sim.env.advance_time(PACE)
    assert (await sim.run(1)).status == "running"
    await sim.env.advance_time(TICK * 2)
    lines = staff_lines(sim)
    assert len([line for line in lines if "paused by" in line]) == 50, lines
    assert len([line for line in lines if "resumed by" in line]) == 50, lines
    assert max(acks) < 1.0, f"slowest acknowledgement {max(acks):.3f} s"
    assert winners.count(a) > 10 and winners.count(b) > 10, "each process won some"
    print(
        f"\nslash command: acknowledged in {sorted(acks)[50] * 1000:.1f} ms median, {max(acks) * 1000:.1f} ms max"
    )


async def test_an_autocomplete_delivered_to_both_processes_is_answered_once(
    pair: Pair, timing: Timing
) -> None:
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    for _ in range(10):
        choices = await sim.mod.autocomplete(sim.staff, "event start", "definition", "ra")
        assert [c["value"] for c in choices] == ["raid"]
        await handled_once(pair, timing, (a, b))


async def test_the_staff_log_live_message_and_mirror_post_once_with_both_processes_running(
    pair: Pair,
) -> None:
    """A whole run with both processes up: the staff log's lines and the live message are
    posted once each, all by the process holding each lease; the other holds none."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(120)
    assert (await sim.run(1)).status == "completed"
    lines = staff_lines(sim)
    assert_each_once(lines)
    assert any("started by" in line for line in lines) and any("confirmed by" in line for line in lines)
    live_posts = [r for r in sim.posts_to(sim.staff_log) if (r.json or {}).get("embeds")]
    assert len(live_posts) == 1, "one live message for the run"
    holders = await lease_owners(sim)
    assert set(holders) == {
        "staff-log",
        "live-run-messages",
        "events-mirror",
        "signup-messages",
        "event-threads",
        "attendee-roles",
        "reminder-dms",
    }
    assert set(holders.values()) <= {owner(a), owner(b)}
    for name, holder in holders.items():
        bot = a if holder == owner(a) else b
        other = b if bot is a else a
        assert bot.work_leases.holds(name) and not other.work_leases.holds(name), name


async def test_a_rolling_restart_loses_no_click_and_posts_nothing_twice(pair: Pair, timing: Timing) -> None:
    """Stop a, start it again, then stop b and start it again, with a GM's Confirm between each
    move: every press is answered once and moves the run one step; every staff-log line is
    posted once and none is missing."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.publish(drill(6))
    await sim.mod.slash(sim.staff, "event start", definition="drill")
    running = [a, b]
    presses = 0

    async def press() -> None:
        nonlocal presses
        pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
        assert pressed.acknowledged
        await handled_once(pair, timing, tuple(running))
        presses += 1
        steps = (await sim.only_run()).phases[0].steps
        assert [s.status for s in steps[:presses]] == ["done"] * presses

    await press()
    await pair.stop(a)
    running.remove(a)
    await press()
    a2 = await pair.join("process-a-again")
    running.append(a2)
    await press()
    await pair.stop(b)
    running.remove(b)
    await press()
    b2 = await pair.join("process-b-again")
    running.append(b2)
    await press()
    await press()
    await sim.env.advance_time(TICK * 3)
    assert (await sim.only_run()).status == "completed"
    lines = staff_lines(sim)
    assert_each_once(lines)
    confirmed = [line for line in lines if "confirmed by" in line]
    assert len(confirmed) == 6, lines
    assert any("completed" in line for line in lines), lines
    live_posts = [r for r in sim.posts_to(sim.staff_log) if (r.json or {}).get("embeds")]
    assert len(live_posts) == 1, "the live message was edited by whichever held it, never posted again"


async def test_a_lease_holder_that_dies_is_taken_over_after_its_lease_runs_out(pair: Pair) -> None:
    """The holder of the staff log dies without giving anything back: the other process posts
    the lines written since, once each, after the lease ran out."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(TICK)
    holder = a if (await lease_owners(sim))["staff-log"] == owner(a) else b
    survivor = b if holder is a else a
    pair.kill(holder)
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(LEASE_PASSES * TICK + 2 * TICK)
    assert (await lease_owners(sim))["staff-log"] == owner(survivor)
    await sim.env.advance_time(120)
    assert (await sim.run(1)).status == "completed"
    lines = staff_lines(sim)
    assert_each_once(lines)
    assert len([line for line in lines if "confirmed by" in line]) == 1, lines
    assert any("completed" in line for line in lines), lines


async def test_a_process_cut_off_from_the_database_acts_on_nothing_and_the_other_answers(
    pair: Pair, timing: Timing, tmp_path: Path
) -> None:
    """b cannot reach the database (its claims go to a file in a directory that does not exist):
    it acts on nothing, even when it hears first; a claims and answers every press, and b's late
    "the database cannot be reached" is refused by Discord, so the GM reads only a's answer.
    With both cut off, the member is told the database cannot be reached, once, and nothing
    moves."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    unreachable = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'db.sqlite3'}")
    try:
        b.interaction_gate.claims = ExternalClaims(unreachable, owner(b))
        await sim.publish(drill(3))
        await sim.mod.slash(sim.staff, "event start", definition="drill")
        for _ in range(2):
            pair.hears_first(b)
            cue = sim.gm_cues.last_message
            pressed = await sim.gm.click(cue, label="Confirm")
            assert pressed.acknowledged and not pressed.ephemeral and not pressed.followups
            [answered] = [m for m in sim.gm_cues.history() if m.id == cue.id]
            assert answered.content.startswith("✅ Confirmed by"), "a's answer stands"
            interaction_id = timing.last()
            assert (await claims(sim))[claim_key(interaction_id)] == owner(a)
            first, late = timing.acknowledged[interaction_id]
            assert first - timing.delivered[interaction_id] < 1.0, "a answered at once"
            assert late - first >= UNCLAIMED_ANSWER_AFTER * 0.9, "b's answer came late, and was refused"
            await sim.env.advance_time(PACE)
        assert b.interaction_gate.failed == 3 and b.interaction_gate.won == 0, "the start and two presses"

        a.interaction_gate.claims = ExternalClaims(unreachable, owner(a))
        pressed = await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
        assert pressed.acknowledged
        assert [m.content for m in pressed.followups] == [DATABASE_DOWN], "told once"
        assert pressed.followups[0].ephemeral
        steps = (await sim.only_run()).phases[0].steps
        assert [s.status for s in steps[:2]] == ["done", "done"]
        assert steps[2].parked, "nothing acted on the press nobody could claim"
    finally:
        await unreachable.dispose()


async def test_a_preview_button_is_handled_by_the_process_that_holds_the_preview(
    pair: Pair, timing: Timing
) -> None:
    """/event publish keeps its preview in the memory of the process that answered it; a
    Publish press heard first by the other process is still claimed by the holder, which
    publishes. With the holder gone, the other answers that the preview expired."""
    sim = pair.sim
    sim.config = make_config(sim.guild, sim.channels, sim.roles, permissions=PUBLISHERS)
    a = await sim.start_bot()
    b = await pair.join("process-b")
    for attempt in range(2):
        spec = raid_spec(title=f"Harbour Assault {attempt}")
        reply = await sim.mod.slash(
            sim.staff, "event publish", file=("raid.yaml", yaml.safe_dump(spec).encode())
        )
        maker, _ = await handled_once(pair, timing, (a, b))
        other = b if maker is a else a
        preview = last_answer(reply)
        pair.hears_first(other)
        pressed = await sim.mod.click(preview, label="Publish")
        assert pressed.acknowledged
        presser, _ = await handled_once(pair, timing, (a, b))
        assert presser is maker, "the process holding the preview claimed the press"
        shown = pressed.response
        assert shown is not None
        assert (
            shown.content == f"✅ Published **Harbour Assault {attempt}** (`raid`) as version {attempt + 2}."
        )
    spec = raid_spec(title="Harbour Assault again")
    reply = await sim.mod.slash(sim.staff, "event publish", file=("raid.yaml", yaml.safe_dump(spec).encode()))
    maker, _ = await handled_once(pair, timing, (a, b))
    pair.kill(maker)
    pressed = await sim.mod.click(last_answer(reply), label="Publish")
    answer = [m.content for m in [pressed.response, *pressed.followups] if m is not None]
    assert any("This preview expired" in text for text in answer), answer


async def test_sigterm_closes_a_process_cleanly_and_its_work_moves_at_once(pair: Pair) -> None:
    """A service manager's stop (SIGTERM) closes the bot as Ctrl-C does: the work it held is
    given back, so the other process takes it at its next pass rather than after the lease."""
    sim = pair.sim
    a, b = sim.bot, await pair.join("process-b")
    await sim.env.advance_time(TICK)
    holder = a if (await lease_owners(sim))["staff-log"] == owner(a) else b
    survivor = b if holder is a else a
    serving = asyncio.Event()

    async def serve() -> None:
        # What ``run`` awaits: serving until stopped, the bot closed on the way out.
        try:
            serving.set()
            await asyncio.Event().wait()
        finally:
            await holder.close()

    stopped = asyncio.ensure_future(until_stopped(serve()))
    await serving.wait()
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(stopped, 10) == "SIGTERM"
    assert holder.is_closed()
    assert set((await lease_owners(sim)).values()) <= {None, owner(survivor)}, "all given back"
    pair.kill(holder)
    await sim.env.advance_time(TICK)
    assert (await lease_owners(sim))["staff-log"] == owner(survivor), "taken at the next pass"
