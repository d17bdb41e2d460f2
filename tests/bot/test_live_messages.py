"""The live run message through the real bot in simcord: one message per run in the staff log
channel, posted when the run starts and edited as it moves, coalesced inside Discord's limits,
carried on after a restart and recreated after a deletion."""

from __future__ import annotations

import itertools
from typing import Any

import discord
import pytest
import sqlalchemy as sa

from bot.cogs.live._loop import EDIT_GAP
from runner.schema import live_messages
from tests.bot.conftest import TICK, Sim
from tests.support.definitions import event, phase, wait

FINAL = "Final: this message is no longer updated"


def live_messages_in(sim: Sim) -> list[discord.Message]:
    """The bot's live messages in the staff log channel (its embeds with the live footer)."""
    return [
        m
        for m in sim.staff_log.history()
        if m.embeds
        and m.embeds[0].footer.text
        and " · " in m.embeds[0].footer.text
        and ("Updated as the run moves" in m.embeds[0].footer.text or FINAL in m.embeds[0].footer.text)
    ]


def the_live_message(sim: Sim) -> discord.Message:
    (message,) = live_messages_in(sim)
    return message


def text_of(message: discord.Message) -> str:
    embed = message.embeds[0]
    parts = [embed.title or "", embed.description or ""]
    parts += [f"{f.name}: {f.value}" for f in embed.fields]
    parts.append(embed.footer.text or "")
    return "\n".join(parts)


def field(message: discord.Message, name: str) -> str:
    return next(f.value or "" for f in message.embeds[0].fields if f.name == name)


def live_posts(sim: Sim) -> list[Any]:
    return [r for r in sim.posts_to(sim.staff_log) if (r.json or {}).get("embeds")]


def live_edits(sim: Sim, message_id: int) -> list[Any]:
    return sim.requests("PATCH", f"/channels/{sim.staff_log.id}/messages/{message_id}")


async def live_rows(sim: Sim) -> list[Any]:
    async with sim.engine.connect() as conn:
        return list(
            (await conn.execute(sa.select(live_messages).order_by(live_messages.c.run_id))).mappings()
        )


async def test_the_live_message_follows_a_run_through_a_retry_a_pause_and_a_gm_confirm(sim: Sim) -> None:
    """What a moderator watching the staff channel sees, stage by stage: the retry of a failed
    announcement with its time and error, the cue waiting for a GM, who paused and resumed it,
    the GM's Confirm, the wait until the last step, and how it ended, with links to what it
    posted; all in one message, edited, and left alone once it shows the end."""
    sim.env.inject_error("POST", f"/channels/{sim.announcements.id}/messages", status=500, times=1)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(1)
    message = the_live_message(sim)
    seen = text_of(message)
    assert "**Harbour Raid** · run 1" in seen
    assert "Status: **running** · Health: **degraded**" in seen
    assert "Phase 1 of 2: **Muster**" in seen
    assert "Step: step 1 (Call to arms)" in seen
    assert "🔁 step 1 (Call to arms) failed (" in seen and "500" in seen and "retrying <t:" in seen
    assert field(message, "Last action").startswith(f"Started by <@{sim.mod.id}> <t:")

    await sim.env.advance_time(30)  # the retry goes out; the cue is posted and waits for a GM
    message = the_live_message(sim)
    seen = text_of(message)
    assert "✋ Waiting for a GM to press Confirm on step 2 (Open the gates)" in seen
    announcement = sim.announcements.last_message
    cue = sim.gm_cues.last_message
    links = field(message, "Posted")
    assert f"https://discord.com/channels/{sim.guild.id}/{sim.announcements.id}/{announcement.id}" in links
    assert f"https://discord.com/channels/{sim.guild.id}/{sim.gm_cues.id}/{cue.id}" in links

    await sim.mod.slash(sim.staff, "event pause", run=1)
    await sim.env.advance_time(EDIT_GAP)
    message = the_live_message(sim)
    assert f"⏸️ Paused by <@{sim.mod.id}>" in text_of(message)
    assert field(message, "Last action").startswith(f"Paused by <@{sim.mod.id}>")
    await sim.mod.slash(sim.staff, "event resume", run=1)
    await sim.env.advance_time(EDIT_GAP)
    message = the_live_message(sim)
    assert field(message, "Last action").startswith(f"Resumed by <@{sim.mod.id}>")
    assert "Waiting for a GM" in text_of(message), "resumed, it waits for the GM again"

    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(EDIT_GAP)
    message = the_live_message(sim)
    seen = text_of(message)
    assert field(message, "Last action").startswith(f"Confirmed step 2 (Open the gates) by <@{sim.gm.id}>")
    assert "Phase 2 of 2: **Finale**" in seen
    assert "⏳ Waiting until <t:" in seen and "then step 4 (Victory)" in seen

    await sim.env.advance_time(70)
    message = the_live_message(sim)
    seen = text_of(message)
    assert message.embeds[0].title == "✅ Completed"
    assert "Ended <t:" in seen and "**completed**" in seen
    assert FINAL in seen
    assert "Waiting" not in seen
    victory = sim.announcements.last_message
    assert f"/{sim.announcements.id}/{victory.id})" in field(message, "Posted")
    assert len(live_posts(sim)) == 1, "one message for the whole run, edited"
    edits = len(live_edits(sim, message.id))
    await sim.env.advance_time(TICK * 6)
    assert len(live_edits(sim, message.id)) == edits, "an ended run's message is left alone"
    [row] = await live_rows(sim)
    assert (row["message_id"], row["closed"]) == (str(message.id), True)


async def test_a_restart_carries_on_editing_the_same_message_and_a_deleted_one_is_posted_again(
    sim: Sim,
) -> None:
    """After a restart the new process edits the message the old one posted (its id is in the
    database), posting no second one; when a moderator deletes it, the next change posts a new
    message, whose id is stored and which is the one edited from then on."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(1)
    first = the_live_message(sim)
    assert "Waiting for a GM" in text_of(first)

    await sim.start_bot()  # a new process: only the database and Discord carry over
    await sim.env.advance_time(EDIT_GAP)
    assert live_edits(sim, first.id) == [], "nothing changed, so nothing is sent"
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(EDIT_GAP)
    assert len(live_posts(sim)) == 1, "no second message after the restart"
    assert len(live_edits(sim, first.id)) == 1
    assert "Confirmed step 2 (Open the gates)" in field(the_live_message(sim), "Last action")

    cleaner = sim.guild.add_member(
        sim.env.create_user("cleaner"),
        roles=[sim.guild.create_role("Cleaner", permissions=discord.Permissions(manage_messages=True))],
    )
    await cleaner.delete(first)
    await sim.env.advance_time(1)  # Discord's delete event: posted again without waiting for the run
    second = the_live_message(sim)
    assert second.id != first.id
    [row] = await live_rows(sim)
    assert row["message_id"] == str(second.id)
    assert len(live_posts(sim)) == 2
    assert live_posts(sim)[1].json["nonce"] != live_posts(sim)[0].json["nonce"], "a new message, a new nonce"
    assert "Confirmed step 2 (Open the gates)" in field(second, "Last action"), "it shows the run as it is"
    await sim.env.advance_time(70)  # the wait passes: the last announcement, then the end
    second = the_live_message(sim)
    assert second.embeds[0].title == "✅ Completed"
    assert live_edits(sim, second.id), "the new message is the one edited"
    assert len(live_posts(sim)) == 2


async def test_a_post_that_died_before_its_id_was_stored_is_posted_again_with_the_same_nonce(
    sim: Sim,
) -> None:
    """A process that claimed a run's message and died before storing the id Discord gave it
    leaves a row with no message: once its claim runs out, the next process posts with the same
    nonce (Discord then answers with the message already posted, within its dedupe window)."""
    from bridge.sql import live_messages as live_sql

    await sim.start_bot(sim.config.model_copy(update={"live_run_messages": False}))
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(1)
    assert live_messages_in(sim) == [], "switched off: no live message"
    now = sim.now()
    async with sim.engine.begin() as conn:
        assert await live_sql.claim_new(conn, 1, str(sim.staff_log.id), "dead-process", now, now)
    await sim.start_bot()
    await sim.env.advance_time(EDIT_GAP)
    (post,) = live_posts(sim)
    assert post.json["nonce"] == "live1.0"
    [row] = await live_rows(sim)
    assert row["message_id"] == str(the_live_message(sim).id) and row["posts"] == 1


async def test_an_edit_that_finds_the_message_gone_posts_a_new_one(sim: Sim) -> None:
    """A deletion the bot did not hear of (it happened while no process was connected) shows as
    a 404 Unknown Message on the next edit: a new message is posted at once, showing the run as
    it is, and its id replaces the old one."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(1)
    first = the_live_message(sim)
    path = f"/channels/{sim.staff_log.id}/messages/{first.id}"
    sim.env.inject_error("PATCH", path, status=404, code=10008, message="Unknown Message", times=1)
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(EDIT_GAP)
    assert len(sim.requests("PATCH", path)) == 1
    posts = live_posts(sim)
    assert len(posts) == 2
    [row] = await live_rows(sim)
    second_id = int(row["message_id"])
    assert second_id != first.id
    second = next(m for m in live_messages_in(sim) if m.id == second_id)
    assert "Confirmed step 2 (Open the gates)" in field(second, "Last action")


class Stamped(list[Any]):
    """simcord's request log, with the simulated instant each request was made."""

    def __init__(self, sim: Sim) -> None:
        backend = sim.env.backend
        super().__init__(backend.http_requests)
        self.clock = backend.clock
        self.at = [self.clock.now()] * len(self)

    def append(self, entry: Any) -> None:
        super().append(entry)
        self.at.append(self.clock.now())


@pytest.mark.slow
async def test_fifty_runs_moving_at_once_stay_inside_the_channel_budget_and_lose_nothing(sim: Sim) -> None:
    """50 runs (one start of 50 scopes), each moving every three or four seconds for close to a
    minute, far more changes than the channel can show: the staff log
    channel never gets more than 5 requests in any 5 s (live messages and staff-log lines
    together), no message is sent or edited twice within EDIT_GAP, every run has exactly one
    message, and once they have all ended every message shows its own run completed: the edits
    skipped in between lost nothing."""
    scopes = [f"table-{n:02}" for n in range(50)]
    await sim.publish(
        event(
            "rush",
            phase("warm-up", *[wait(3) for _ in range(8)], label="Warm-up"),
            phase("race", *[wait(4) for _ in range(6)], label="Race"),
            title="Speed Quiz",
            scopes=scopes,
        )
    )
    stamped = Stamped(sim)
    sim.env.backend.http_requests = stamped
    await sim.mod.slash(sim.staff, "event start", definition="rush")
    for _ in range(15):
        await sim.env.advance_time(10)

    staff = f"/channels/{sim.staff_log.id}/messages"
    sent = [
        (at, r)
        for at, r in zip(stamped.at, stamped, strict=True)
        if r.path.startswith(staff) and r.method in ("POST", "PATCH")
    ]
    moments = [at for at, _ in sent]
    busiest = 0
    for index, start in enumerate(moments):
        window = [m for m in moments[index:] if (m - start).total_seconds() < 5]
        assert len(window) <= 5, f"{len(window)} requests to the staff channel in 5 s from {start}"
        busiest = max(busiest, len(window))
    assert busiest == 5, "the runs wanted more than the channel allows, so the budget was what held"
    live_posted = [(at, r) for at, r in sent if r.method == "POST" and (r.json or {}).get("embeds")]
    assert len(live_posted) == 50
    by_message: dict[str, list[Any]] = {}
    messages = live_messages_in(sim)
    posted_at = dict(zip((m.id for m in messages), (at for at, _ in live_posted), strict=True))
    for at, r in sent:
        if r.method == "PATCH":
            by_message.setdefault(r.path.rsplit("/", 1)[1], []).append(at)
    assert by_message, "the messages were edited as the runs moved"
    for message_id, moments_of in by_message.items():
        times = [posted_at[int(message_id)], *moments_of]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
        assert min(gaps) >= EDIT_GAP, f"message {message_id} was sent twice within {EDIT_GAP} s: {gaps}"

    assert len(messages) == 50
    rows = await live_rows(sim)
    assert len(rows) == 50 and all(r["closed"] for r in rows)
    names = set()
    for message in messages:
        seen = text_of(message)
        assert message.embeds[0].title == "✅ Completed", seen
        assert FINAL in seen and "**completed**" in seen
        run_id = next(r["run_id"] for r in rows if r["message_id"] == str(message.id))
        run = await sim.run(run_id)
        assert run.status == "completed"
        assert f"**Speed Quiz** ({run.scope}) · run {run_id}" in seen
        names.add(run.scope)
    assert names == set(scopes)


async def test_at_most_max_open_runs_have_a_live_message_at_once(sim: Sim, monkeypatch: Any) -> None:
    """A start of many scopes posts live messages for the first MAX_OPEN runs only (the channel's
    budget would otherwise go to them for minutes); the others get none while those are open."""
    import bot.cogs.live._loop

    monkeypatch.setattr(bot.cogs.live._loop, "MAX_OPEN", 3)
    await sim.publish(
        event("crowd", phase("main", wait(600), wait(1)), title="Crowd", scopes=[f"s{n}" for n in range(5)])
    )
    await sim.mod.slash(sim.staff, "event start", definition="crowd")
    await sim.env.advance_time(3 * EDIT_GAP)
    assert len(live_messages_in(sim)) == 3
    assert [r["run_id"] for r in await live_rows(sim)] == [1, 2, 3]


def test_a_live_message_fits_discords_limits_whatever_the_run_holds() -> None:
    """Labels, a title, a scope and an error far over Discord's limits, 300 posted messages and
    a sign-up listing 60 long-named options: every part of the embed is within its limit, the links
    that do not fit are counted, and the whole stays under 6,000 characters."""
    import datetime as dt

    from actions import limits
    from bot.cogs.live._render import live_embed
    from bridge.live import HumanAction, LiveView, PostedLink, Waiting, WaitKind
    from runner.definitions.signup import SignupDefinition
    from runner.history import Actor
    from runner.signups import OptionList, Signup, SignupList
    from runner.states import SignupStatus
    from runner.views import PhaseView, RunView, StepView

    at = dt.datetime(2026, 1, 1)
    huge = "x" * 5000
    step = StepView(9, "p", 0, huge, "core.announce", "pending", False, at, 1, huge, None, None)
    run = RunView(
        id=1,
        definition_key="k" * 64,
        title=huge,
        scope="s" * 190,
        status="running",
        health="degraded",
        rehearsal=True,
        current_phase="p",
        scheduled_for=at,
        started_at=at,
        ended_at=None,
        started_by=Actor("1", huge),
        last_error=huge,
        version_id=1,
        phases=[PhaseView("p", huge, True, [step])],
    )
    view = LiveView(
        run=run,
        phase_index=1,
        phase_count=1,
        phase_label=huge,
        step=f"step 9 ({huge})",
        waiting=Waiting(WaitKind.RETRY, until=at, error=huge),
        last_action=HumanAction("skip", Actor(None, huge), at, f"step 9 ({huge})", huge),
        posted=[PostedLink(f"step {n} ({huge})", 10**18 + n, 10**18 + n) for n in range(300)],
        signup_list=SignupList(
            run_id=1,
            # 20 options (the most a definition holds), and 40 an older version had, still listed.
            definition=SignupDefinition(options={f"{n:02d}" + "o" * 30: 1000 for n in range(20)}),
            options=[
                OptionList(
                    f"{n:02d}" + "o" * 30,
                    1000,
                    confirmed=[Signup(str(m), "m", "o", SignupStatus.CONFIRMED, m, at) for m in range(999)],
                )
                for n in range(60)
            ],
            starts_at=at,
            closes_at=at,
            run_status="running",
        ),
    )
    embed = live_embed(view, 111_111_111_111_111_111)
    assert len(embed) <= limits.EMBED_TOTAL_MAX
    assert len(embed.title or "") <= limits.EMBED_TITLE_MAX
    assert len(embed.description or "") <= limits.EMBED_DESCRIPTION_MAX
    for item in embed.fields:
        assert len(item.value or "") <= limits.EMBED_FIELD_VALUE_MAX
    links = next(f.value or "" for f in embed.fields if f.name == "Posted")
    assert "https://discord.com/channels/111111111111111111/" in links
    assert links.rstrip().endswith("more"), "the links that do not fit are counted"
    counts = next(f.value or "" for f in embed.fields if f.name == "Sign-ups")
    assert counts.startswith("00" + "o" * 30 + " 999/1000 · "), counts[:100]
