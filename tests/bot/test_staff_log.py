"""The staff log, through the real bot in simcord: a line for every control and every cue action
with who pressed it, for every step that failed or is being retried and why, for every run
missed, degraded or stalled; each line once, each with a working jump link to the message it
concerns, and a burst summed up within Discord's limits and the channel's budget."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import discord
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import limits, validation_registry
from bot.channel_budget import MESSAGES_PER_WINDOW, WINDOW_SECONDS
from bot.cogs.staff_log._bursts import BURST, run_ranges, summarise
from bot.cogs.staff_log._lines import Line
from bot.cogs.staff_log._loop import StaffLog
from runner import history
from runner.catalog import VersionCache
from runner.clock import ManualClock
from runner.engine import Runner, RunnerSettings
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim, make_config, raid_spec
from tests.support.definitions import cron, event, phase, wait

LINK = re.compile(
    r" · \[(?P<label>[^\]]+)\]\(https://discord\.com/channels/(?P<guild>\d+)/(?P<channel>\d+)/(?P<message>\d+)\)$"
)
RAID = "**Harbour Raid** · run"


def log_lines(sim: Sim) -> list[str]:
    """What the staff log posted (the runs' live messages, embeds, share the channel)."""
    return [line for m in sim.staff_log.history() if not m.embeds for line in m.content.splitlines()]


def words(line: str) -> str:
    """A line without its link."""
    return LINK.sub("", line)


def the_line(sim: Sim, start: str) -> str:
    """The one line that starts so (a second one would be a line posted twice)."""
    found = [line for line in log_lines(sim) if line.startswith(start)]
    assert len(found) == 1, (start, log_lines(sim))
    return found[0]


def target(sim: Sim, line: str) -> tuple[str, discord.Message]:
    """The link's label and the real message in simcord's channel its URL names."""
    match = LINK.search(line)
    assert match, f"no jump link in {line!r}"
    assert int(match["guild"]) == sim.guild.id, line
    channel = next((c for c in sim.channels.values() if c.id == int(match["channel"])), None)
    assert channel is not None, f"{line!r} links to a channel that is not the server's"
    message = next((m for m in channel.history() if m.id == int(match["message"])), None)
    assert message is not None, f"{line!r} links to no message of #{channel.name}"
    return match["label"], message


def assert_links_the_run(sim: Sim, line: str, run_id: int) -> None:
    """A run-level line links the run's live message (its embed names the run), or, before the
    live message is up, the last message the run posted."""
    label, message = target(sim, line)
    if label == "live message":
        assert message.channel.id == sim.staff_log.id
        assert (message.embeds[0].description or "").startswith(f"{RAID} {run_id}"), message.embeds[0]
    else:
        assert label in ("announcement", "cue"), line
        assert message.channel.id in (sim.announcements.id, sim.gm_cues.id)


async def test_every_control_is_posted_with_who_pressed_it_and_a_link_to_the_run(sim: Sim) -> None:
    """Start, pause, resume and cancel (with its reason) each give one line naming the member as
    a mention, linking the run. The pause line says what a pause does to a step under way."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.mod.slash(sim.staff, "event pause", run=1)
    await sim.mod.slash(sim.staff, "event resume", run=1)
    await sim.mod.slash(sim.staff, "event cancel", run=1, reason="storm over the harbour")
    await sim.env.advance_time(TICK)

    mod = sim.mod.mention
    expected = {
        f"▶️ {RAID} 1 started by {mod}": 1,
        f"⏸️ {RAID} 1 paused by {mod}: nothing new starts until it is resumed (a step already under way finishes)": 1,
        f"▶️ {RAID} 1 resumed by {mod}": 1,
        f"⏹️ {RAID} 1 cancelled by {mod}: storm over the harbour": 1,
    }
    for text, run_id in expected.items():
        line = the_line(sim, text)
        assert words(line) == text
        assert_links_the_run(sim, line, run_id)
        assert target(sim, line)[0] == "live message", "even the start's line waits for it"


async def test_a_gm_confirm_and_a_gm_skip_link_the_cue_they_answered(sim: Sim) -> None:
    """A GM's Confirm and Skip on a cue (history's step.confirmed / step.skipped) reach the staff
    log with the GM as a mention, the step as /event skip numbers it, and a link to the cue."""
    await sim.publish(raid_spec(key="raid-two"))  # one run of an event is in flight at a time
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    first_cue = sim.gm_cues.last_message
    await sim.mod.slash(sim.staff, "event start", definition="raid-two")
    second_cue = sim.gm_cues.last_message
    assert first_cue.id != second_cue.id
    await sim.gm.click(first_cue, label="Confirm")
    await sim.gm.click(second_cue, label="Skip")
    await sim.env.advance_time(TICK)

    run_2_steps = [s.id for p in (await sim.run(2)).phases for s in p.steps]
    confirmed = the_line(sim, f"☑️ {RAID} 1:")
    assert words(confirmed) == f"☑️ {RAID} 1: step 2 (Open the gates) confirmed by {sim.gm.mention}"
    skipped = the_line(sim, f"⏭️ {RAID} 2:")
    cue_step = run_2_steps[1]
    assert words(skipped) == f"⏭️ {RAID} 2: step {cue_step} (Open the gates) skipped by {sim.gm.mention}"
    for line, message in ((confirmed, first_cue), (skipped, second_cue)):
        label, linked = target(sim, line)
        assert (label, linked.channel.id, linked.id) == ("cue", sim.gm_cues.id, message.id)


async def test_event_skip_of_a_step_names_the_step_and_who_skipped_it(sim: Sim) -> None:
    """``/event skip`` of the open cue links the cue; of a step not reached yet (nothing posted),
    the line links the run."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue_message = sim.gm_cues.last_message
    await sim.mod.slash(sim.staff, "event skip", run=1, step=2)
    # The finale's steps exist once it starts: its wait (step 3) is under way, step 4 pending.
    await sim.mod.slash(sim.staff, "event skip", run=1, step=4)
    await sim.env.advance_time(TICK)

    mod = sim.mod.mention
    victory = the_line(sim, f"⏭️ {RAID} 1: step 4")
    assert words(victory) == f"⏭️ {RAID} 1: step 4 (Victory) skipped by {mod}"
    assert_links_the_run(sim, victory, 1)
    gates = the_line(sim, f"⏭️ {RAID} 1: step 2")
    assert words(gates) == f"⏭️ {RAID} 1: step 2 (Open the gates) skipped by {mod}"
    label, linked = target(sim, gates)
    assert (label, linked.id) == ("cue", cue_message.id)


async def test_without_live_messages_a_run_line_links_the_runs_latest_post(sim: Sim) -> None:
    """``live_run_messages: false``: a run-level line does not wait for a live message; it links
    the last message the run posted (here the cue, posted just after the announcement)."""
    await sim.start_bot(make_config(sim.guild, sim.channels, sim.roles, live_run_messages=False))
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    cue_message = sim.gm_cues.last_message
    line = the_line(sim, f"▶️ {RAID} 1 started")
    label, linked = target(sim, line)
    assert (label, linked.channel.id, linked.id) == ("cue", sim.gm_cues.id, cue_message.id)
    assert all(not m.embeds for m in sim.staff_log.history()), "no live message was posted"


async def locked_raid(sim: Sim, on_failure: str | None) -> discord.abc.GuildChannel:
    """The raid, its first announcement to a channel the bot may not post in."""
    bot_member = sim.bot.get_guild(sim.guild.id).me
    locked = sim.guild.create_text_channel(
        "locked", overwrites={bot_member: discord.PermissionOverwrite(send_messages=False)}
    )
    await sim.start_bot(make_config(sim.guild, sim.channels | {"locked": locked}, sim.roles))
    spec = raid_spec()
    spec["phases"][0]["steps"][0]["params"]["channel"] = "locked"
    if on_failure is not None:
        spec["phases"][0]["steps"][0]["on_failure"] = on_failure
    await sim.publish(spec)
    result = await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.mod.click(result.response, label="Start anyway")
    return locked


async def test_a_failed_step_that_paused_the_run_and_its_retry_say_why_and_who(sim: Sim) -> None:
    """The step fails for good (the bot may not post in #locked): one line says the run paused
    after which step and why (the step's own failure is not said twice). ``/event retry`` gives
    the retry's line: which step, who, and the error it had failed with."""
    await locked_raid(sim, on_failure="pause")
    await sim.mod.slash(sim.staff, "event retry", run=1)
    await sim.env.advance_time(TICK)

    paused = [line for line in log_lines(sim) if line.startswith(f"⏸️ {RAID} 1 paused after")]
    assert len(paused) == 2, "once when it failed, once when the retry failed again"
    said = words(paused[0])
    assert said.startswith(f"⏸️ {RAID} 1 paused after step 1 (Call to arms) failed: ")
    assert "#locked" in said and "Send Messages" in said
    assert not any(
        "step 1 (Call to arms) failed (" in line or "carries on" in line for line in log_lines(sim)
    )
    retried = the_line(sim, f"🔁 {RAID} 1:")
    assert words(retried).startswith(
        f"🔁 {RAID} 1: step 1 (Call to arms) retried by {sim.mod.mention} (it had failed: "
    )
    assert "#locked" in retried
    for line in (*paused, retried):
        assert_links_the_run(sim, line, 1)


async def test_a_failed_step_the_run_carries_past_is_said_with_its_reason(sim: Sim) -> None:
    """``on_failure: skip``: the step's failure is a line of its own (the run is degraded and goes
    on), with the error."""
    await locked_raid(sim, on_failure="skip")
    await sim.env.advance_time(TICK)
    line = the_line(sim, f"❌ {RAID} 1")
    said = words(line)
    assert said.startswith(f"❌ {RAID} 1 is degraded: step 1 (Call to arms) failed: ")
    assert said.endswith("; the run carries on past it") and "#locked" in said
    assert_links_the_run(sim, line, 1)


async def test_a_step_being_retried_says_the_error_the_attempt_and_the_next_try(sim: Sim) -> None:
    """Discord answers 500: the step is retried after the runner's retry delay. One line says the
    run is degraded, which step, the attempt, when the next try is (``<t:…:R>``) and why."""
    sim.env.inject_error("POST", f"/channels/{sim.announcements.id}/messages", status=500, times=1)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    next_try = int(sim.env.now().timestamp() + RunnerSettings().retry_seconds)
    await sim.env.advance_time(TICK)

    line = the_line(sim, f"🔁 {RAID} 1")
    said = words(line)
    head = (
        f"🔁 {RAID} 1 is degraded: step 1 (Call to arms) failed (attempt 1), trying again <t:{next_try}:R>: "
    )
    assert said.startswith(head), said
    assert "500" in said
    assert not any(" is degraded: step" in other and other != line for other in log_lines(sim)), "said once"
    assert_links_the_run(sim, line, 1)


def waiting_spec(**fields: Any) -> dict[str, Any]:
    return raid_spec(phases=[phase("main", wait(3600, label="Hold"), wait(1, label="Then"))], **fields)


async def test_a_stalled_run_is_said_with_why_and_links_its_live_message(sim: Sim) -> None:
    """A runner far behind marks the run stalled; the staff log says why, linking the live
    message (the run has posted nothing else)."""
    await sim.publish(waiting_spec())
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(TICK)
    late = sim.now() + dt.timedelta(seconds=3600 + RunnerSettings().stall_after_seconds + 60)
    behind = Runner(
        sim.engine,
        validation_registry(),
        clock=ManualClock(late),
        owner="behind:1",
        settings=dataclasses.replace(RunnerSettings(), due_batch=0),
    )
    assert (await behind.tick()).stalled == 1
    await sim.env.advance_time(TICK)

    line = the_line(sim, f"🛑 {RAID} 1")
    assert (
        words(line) == f"🛑 {RAID} 1 is stalled: nobody has advanced it for 11 minutes past when it was due"
    )
    label, _ = target(sim, line)
    assert label == "live message"
    assert_links_the_run(sim, line, 1)


async def test_a_missed_run_is_said(sim: Sim) -> None:
    """An occurrence nobody started within its grace window (every runner was down) is missed."""
    await sim.publish(waiting_spec(schedule={"cron": "30 0 * * *", "timezone": "UTC"}, grace_seconds=60))
    await sim.env.advance_time(TICK * 2)  # the bot's tick creates the 00:30 occurrence
    (run,) = await list_runs(sim.engine)
    assert run.status == "scheduled"
    late = run.scheduled_for + dt.timedelta(minutes=30)
    behind = Runner(sim.engine, validation_registry(), clock=ManualClock(late), owner="behind:1")
    assert (await behind.tick()).missed == 1
    await sim.env.advance_time(TICK)

    line = the_line(sim, f"⚠️ {RAID} {run.id}")
    assert words(line) == f"⚠️ {RAID} {run.id} was missed: it did not start within its grace window"
    assert LINK.search(line) is None, "a run that never started has no message to link"


async def test_each_line_is_posted_once_across_passes_and_a_restart(sim: Sim) -> None:
    """Several passes, a restart of the bot (a new process starts from now), more controls: every
    line is in the channel once, and what the first process posted is not posted again."""
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.gm.click(sim.gm_cues.last_message, label="Confirm")
    await sim.env.advance_time(TICK * 3)
    before = log_lines(sim)
    assert [words(line) for line in before] == [
        f"▶️ {RAID} 1 started by {sim.mod.mention}",
        f"☑️ {RAID} 1: step 2 (Open the gates) confirmed by {sim.gm.mention}",
    ]

    await sim.start_bot()
    await sim.env.advance_time(TICK * 3)
    await sim.mod.slash(sim.staff, "event pause", run=1)
    await sim.env.advance_time(TICK * 2)
    await sim.mod.slash(sim.staff, "event resume", run=1)
    await sim.env.advance_time(60 + TICK * 2)

    after = log_lines(sim)
    assert after[: len(before)] == before, "the first process's lines are not posted again"
    assert [words(line).split(":")[0] for line in after[len(before) :]] == [
        f"⏸️ {RAID} 1 paused by {sim.mod.mention}",
        f"▶️ {RAID} 1 resumed by {sim.mod.mention}",
        f"✅ {RAID} 1 completed",
    ]
    assert len(set(after)) == len(after)


LONG_TITLE = "The Siege of the Harbour at Dawn, " * 5


async def quiet_log(sim: Sim, events: int) -> StaffLog:
    """A bot with no live messages (nothing else posts in the staff channel), its own staff log
    loop stopped, and a staff log this test passes by hand; ``events`` events started, whose
    start lines need two messages."""
    await sim.start_bot(make_config(sim.guild, sim.channels, sim.roles, live_run_messages=False))
    await sim.bot.staff_log.loop.stop()
    staff_log = StaffLog(dataclasses.replace(sim.bot.kit, versions=VersionCache()), interval=TICK)
    await staff_log.prime()
    for index in range(events):
        await sim.publish(event(f"siege-{index}", phase("main", wait(3600)), title=f"{LONG_TITLE}{index}"))
        await sim.mod.slash(sim.staff, "event start", definition=f"siege-{index}")
    return staff_log


async def until(done: Callable[[], bool], what: str) -> None:
    """Let the loop run until ``done`` (the test's clock is virtual: only yield, never sleep)."""
    for _ in range(200_000):
        if done():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never: {what}")


def started_lines(sim: Sim) -> list[str]:
    return [line for line in log_lines(sim) if line.startswith("▶️ ")]


async def test_defect_stafflog_a_pass_that_fails_half_way_posts_the_rest_later_never_twice(sim: Sim) -> None:
    """Before: when Discord failed the second message of a pass (a 5xx), the poster stopped and
    moved its cursor past the whole pass, so the lines of the failed message and every later one
    were never posted (and an error other than an HTTP one left the cursor where it was, so the
    next pass posted the first message again). Now the cursor follows what went out: the next
    pass posts the failed message, and nothing twice."""
    staff_log = await quiet_log(sim, events=10)
    for _ in range(MESSAGES_PER_WINDOW - 1):
        await sim.bot.channel_budget.take(sim.staff_log.id)  # the first message takes the last slot
    passing = asyncio.ensure_future(staff_log.post_new())
    await until(lambda: len(started_lines(sim)) > 0, "the first message goes out")
    first = started_lines(sim)
    assert not passing.done(), "the second message waits for the channel's budget"
    # A 503: discord.py gives up at once (it retries 500, 502 and 504 itself).
    sim.env.inject_error("POST", f"/channels/{sim.staff_log.id}/messages", status=503, times=1)
    # The budget's window is the event loop's clock, which is real time in simcord.
    await asyncio.wait_for(passing, WINDOW_SECONDS + 5)
    assert started_lines(sim) == first, "the second message failed"

    await staff_log.post_new()
    await staff_log.post_new()
    lines = started_lines(sim)
    assert lines[: len(first)] == first
    assert len(lines) == 10 and len(set(lines)) == 10, lines
    assert sorted(int(line.split("· run ")[1].split(" ")[0]) for line in lines) == list(range(1, 11))


async def test_defect_stafflog_a_refused_message_does_not_drop_the_rest_of_the_pass(sim: Sim) -> None:
    """Before: a message Discord refused (a 400) stopped the pass and every later message of it
    was lost. Now the refused message's lines are dropped (never retried, so never twice) and
    the rest of the pass goes out."""
    staff_log = await quiet_log(sim, events=10)
    sim.env.inject_error("POST", f"/channels/{sim.staff_log.id}/messages", status=400, code=50035, times=1)
    await staff_log.post_new()
    await staff_log.post_new()
    lines = started_lines(sim)
    assert 0 < len(lines) < 10, "the first message was refused, the second went out"
    assert len(set(lines)) == len(lines)
    assert f"{LONG_TITLE}9" in lines[-1], "the last event's line is in the message that went out"


class Timed(list):  # type: ignore[type-arg]
    """simcord's request log, noting the (virtual) loop time of each request as it is made."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.times: list[float] = [float("-inf")] * len(items)

    def append(self, item: Any) -> None:
        self.times.append(asyncio.get_running_loop().time())
        super().append(item)


# Starting 500 runs is one tick of the runner that takes half a minute on a busy machine.
@pytest.mark.slow
@pytest.mark.simcord(settle_timeout=120)
async def test_a_burst_of_500_scopes_starting_on_schedule_is_one_summary(sim: Sim) -> None:
    """An event with 500 scopes starts on schedule: the staff log posts one summary line (the
    count, the run ids, the first scopes and how many more) instead of 500 lines; every message
    fits Discord's content limit, and the staff channel (shared with the live run messages)
    never gets more than 5 sends or edits in any 5 seconds."""
    timed = Timed(sim.env.backend.http_requests)
    sim.env.backend.http_requests = timed
    scopes = [f"s{i:03}" for i in range(500)]
    spec = event(
        "muster",
        phase("main", wait(3600, label="Hold")),
        title="Raid",
        scopes=scopes,
        schedule=cron("2 0 * * *"),
    )
    await sim.publish(spec)
    for _ in range(5):  # to 00:02, then the live messages' first minute
        await sim.env.advance_time(60)

    runs = [r for r in await list_runs(sim.engine, limit=1000) if r.definition_key == "muster"]
    assert len(runs) == 500 and {r.status for r in runs} == {"running"}
    ids = sorted(r.id for r in runs)
    assert ids == list(range(ids[0], ids[0] + 500))
    lines = log_lines(sim)
    head = f"▶️ 500 runs of **Raid** started on schedule: runs {ids[0]}–{ids[-1]}, scopes s000, s001, s002, "
    (summary,) = [line for line in lines if line.startswith("▶️ 500 runs")]
    assert summary.startswith(head), summary
    shown = summary[len("▶️ 500 runs of **Raid** started on schedule: runs ") :].split("scopes ")[1]
    listed, more = shown.split(" … and ")
    assert more == f"{500 - len(listed.split(', '))} more"
    assert not [line for line in lines if line.startswith("▶️ **Raid**")], "no line per run"

    staff = f"/channels/{sim.staff_log.id}/messages"
    sends = [
        (at, r) for at, r in zip(timed.times, timed, strict=True)
        if r.method in ("POST", "PATCH") and r.path.startswith(staff)
    ]  # fmt: skip
    assert all(len((r.json or {}).get("content") or "") <= limits.CONTENT_MAX for _, r in sends)
    moments = sorted(at for at, _ in sends)
    assert len(moments) > MESSAGES_PER_WINDOW, "the live messages and the summary shared the channel"
    for earlier, later in zip(moments, moments[MESSAGES_PER_WINDOW:], strict=False):
        assert later - earlier >= WINDOW_SECONDS - 1e-6, "more than 5 sends in 5 seconds"


def test_a_summary_names_runs_by_ranges_and_marks_a_rehearsal() -> None:
    """Run ids that are not consecutive are given as ranges; a rehearsal's burst is marked; up to
    five lines of a kind stay lines of their own."""
    assert run_ranges([3, 7, 8, 9, 12]) == "runs 3, 7–9, 12"
    assert run_ranges([4]) == "run 4"

    def started(run_id: int, *, rehearsal: bool = False) -> Line:
        name = f"**Raid** (s{run_id}) · run {run_id}"
        return Line(
            "▶️", name, " started on schedule", run_id, (run_id,), group="started on schedule",
            event=("raid", rehearsal), title="Raid", scope=f"s{run_id}",
        )  # fmt: skip

    few = [started(i) for i in range(1, BURST + 1)]
    assert summarise(few) == few
    (summary,) = summarise([started(i, rehearsal=True) for i in (1, 2, 3, 5, 6, 7)])
    assert summary.text == (
        "▶️ 6 runs of [REHEARSAL] **Raid** started on schedule: runs 1–3, 5–7, scopes s1, s2, s3, s5, s6, s7"
    )
    assert summary.entry_ids == (1, 2, 3, 5, 6, 7) and not summary.linked


@pytest.mark.parametrize("backend", ["mariadb"])
async def test_defect_stafflog_never_posts_a_line_committed_after_a_higher_id(
    sim: Sim, engine: AsyncEngine
) -> None:
    """Before: on MariaDB a transaction that took a log id and committed after a later one had
    been read was never posted (the cursor had moved past its id). Now the staff log, reading a
    MariaDB run log where A takes an id, B the next and commits first, posts B, then A once A
    commits, and neither twice. (The runs are not in that database: the lines name them by id.)"""
    await sim.start_bot(make_config(sim.guild, sim.channels, sim.roles, live_run_messages=False))
    await sim.bot.staff_log.loop.stop()
    staff_log = StaffLog(
        dataclasses.replace(sim.bot.kit, engine=engine, versions=VersionCache()), interval=TICK
    )
    await staff_log.prime()
    at = dt.datetime(2026, 1, 1, 12, 0)
    async with engine.connect() as writer_a:
        transaction_a = await writer_a.begin()
        await history.record(writer_a, 901, history.RunDegraded("taken first, committed last"), at)
        async with engine.begin() as writer_b:
            await history.record(writer_b, 902, history.RunDegraded("taken second, committed first"), at)
        await staff_log.post_new()
        assert [line for line in log_lines(sim) if "committed" in line] != []
        await transaction_a.commit()
    for _ in range(3):
        await staff_log.post_new()
    lines = [words(line) for line in log_lines(sim) if "committed" in line]
    assert len(lines) == 2 and len(set(lines)) == 2, lines
    assert "committed first" in lines[0] and "committed last" in lines[1], lines
