"""``python -m bot rehearse``: the real engine on a virtual clock, a console in place of Discord.

Each test names the promise it guards; most would have caught a rehearsal that reports success
while the engine did something else, or that hangs instead of ending.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from actions.delivery import DeliveryError
from rehearsal import ConsoleDelivery, RehearsalOptions, rehearse
from runner import views
from tests.cli.conftest import (
    EXAMPLE_CONFIG,
    EXAMPLE_FILES,
    EXAMPLES,
    Cli,
    announce,
    definition,
    on_database,
    sqlite_url,
    write_yaml,
)
from wiring.config import Config

INVASION = EXAMPLES / "invasion.yaml"
TREASURE = EXAMPLES / "treasure-hunt.yaml"
SCOPES = ("aurora", "borealis", "celestia")
STAMP = re.compile(r"^\[\+\d{2}:\d{2}:\d{2}\] ")

STRICT_CONFIG = {
    "channels": {"announcements": 100000000000000101, "gm-cues": 100000000000000104},
    "roles": {"event-pings": 100000000000000201, "raid-team": 100000000000000202},
    "gm_channel": "gm-cues",
    "announce": {"allowed_ping_roles": ["event-pings"]},
}


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_rehearses_to_completion(cli: Cli, example: Path) -> None:
    """The issue's promise: each bundled example rehearses to completion, exit code 0."""
    result = cli("rehearse", example, "--cues", "confirm")
    assert result.code == 0, result.out
    finals = [line for line in result.lines if "(health " in line]
    assert finals and all(": completed (health ok)" in line for line in finals), finals
    assert "rehearsal completed" in result.out
    assert "announcement in #" in result.out
    # Every line an event produced carries its virtual time.
    timed = [line for line in result.lines if line.startswith("[+")]
    assert timed and all(STAMP.match(line) for line in timed)


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_rehearses_against_the_example_config(cli: Cli, example: Path) -> None:
    """With a config that names channels, every alias is held to it as the bot would: the
    examples must only use channels and roles config.example.yaml has."""
    result = cli("rehearse", example, "--config", EXAMPLE_CONFIG, "--cues", "confirm")
    assert result.code == 0, result.out
    assert "FAILED" not in result.out
    assert "dropped" not in result.out, "an example pings a role config.example.yaml lacks"


def test_the_invasion_shows_what_players_and_gms_would_see_at_virtual_times(cli: Cli) -> None:
    """Announcements per world with the scope filled in, embed fields, who is pinged; the cue as
    a GM sees it with its buttons; waits compressed on the virtual clock (10 + 15 + 5 minutes)."""
    result = cli("rehearse", INVASION, "--cues", "confirm")
    out = result.out
    assert result.code == 0
    for scope in SCOPES:
        assert re.search(
            rf"run \d {scope}: announcement in #announcements, pings @invasion-alerts$", out, re.M
        )
        assert f"@invasion-alerts The Shadow Legion has been sighted at the gates of {scope}!" in out
        assert f"┃ Invasion of {scope}" in out
        assert f"┃ Where: The northern gate of {scope}" in out
        assert f"│ Spawn the Shadow Warlord in {scope}" in out
    assert out.count("GM cue in the GM channel, pings @game-masters") == 3
    assert out.count("[ Confirm ]  [ Skip ]") == 3
    assert out.count("confirmed by rehearsal") == 3
    assert "what comes next waits 10m (until +00:10:00)" in out
    assert re.search(r"^\[\+00:10:00\] run \d aurora: announcement in #announcements, no ping$", out, re.M)
    assert re.search(r"^\[\+00:25:00\] run \d borealis: GM cue in", out, re.M)
    assert re.search(r"^\[\+00:30:00\] run \d celestia: completed \(health ok\)$", out, re.M)
    # The Warlord is spawned over RCON once its cue is confirmed, and the reward reaches the game
    # through a webhook: both shown, never sent (issue 29 item 6).
    assert out.count("would send to rcon game: /spawn shadow-warlord gate-north") == 3
    assert out.count("would post to webhook rewards: {") == 3
    assert out.count("(a rehearsal: nothing is sent)") == 6


def test_a_step_waiting_for_an_approval_shows_the_wait_and_is_answered_as_a_cue(
    cli: Cli, tmp_path: Path
) -> None:
    """Risk decides (issue 29 item 4): with ``approve_from: moderate`` the invasion's webhook step
    waits for staff; the transcript shows the card and the wait, ``--cues confirm`` approves it,
    and only then is the webhook shown, once per run. ``--cues skip`` skips it: never shown."""
    config = write_yaml(tmp_path / "config.yaml", {"approve_from": "moderate"})
    result = cli("rehearse", INVASION, "--config", config, "--cues", "confirm")
    out = result.out
    assert result.code == 0, out
    # Both of the invasion's game steps are moderate: the spawn (RCON) and the reward (webhook).
    assert out.count("approval needed in the staff log: ") == 6
    assert out.count("runs webhook.post (moderate)") == 3
    assert out.count("runs rcon.command (moderate)") == 3
    assert out.count("[ Approve ]  [ Skip ]") == 6
    assert out.count("is waiting for staff to approve or skip it") == 6
    assert out.count("approved by rehearsal") == 6
    assert out.count("would post to webhook rewards: {") == 3
    first_wait = out.index("is waiting for staff to approve or skip it")
    assert first_wait < out.index("would post to webhook rewards: {"), "the wait comes before the post"
    skipped = cli("rehearse", INVASION, "--config", config, "--cues", "skip")
    assert skipped.code == 0, skipped.out
    # The skipped GM cue means no spawn (its step runs only when the cue is confirmed).
    assert skipped.out.count("is waiting for staff to approve or skip it") == 3
    assert "would post to webhook rewards" not in skipped.out


def test_cues_ask_asks_staff_to_approve_a_step_waiting_for_an_approval(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--cues ask`` asks about an approval as about a cue, in staff's words: c approves it (the
    webhook is then shown), s skips it (never shown)."""
    config = write_yaml(tmp_path / "config.yaml", {"approve_from": "moderate"})
    # Three GM cues, three spawns to approve, then the three rewards: approved, skipped, skipped.
    monkeypatch.setattr(sys, "stdin", io.StringIO("c\nc\nc\nc\nc\nc\nc\ns\ns\n"))
    result = cli("rehearse", INVASION, "--config", config, "--cues", "ask")
    assert result.code == 0, result.out
    asked = re.findall(
        r"Staff for run \d \w+, approve step \d+ \(Send the Shadow Shards\): \[c\]onfirm", result.out
    )
    assert len(asked) == 3
    assert result.out.count("approved by rehearsal") == 4 and result.out.count("skipped by rehearsal") == 2
    assert result.out.count("would post to webhook rewards: {") == 1


def test_a_delivery_is_printed_after_its_run_started_and_before_its_step_is_done(cli: Cli) -> None:
    """The console prints a message where it happened in the run's story, not in the order the
    tick happened to write it."""
    lines = cli("rehearse", TREASURE, "--cues", "confirm", "-v").lines
    started = next(i for i, line in enumerate(lines) if "phase 'hunt' (The hunt) started" in line)
    shown = next(i for i, line in enumerate(lines) if "announcement in #event-chat" in line)
    done = next(i for i, line in enumerate(lines) if "step 1 (First clue) done" in line)
    assert started < shown < done


def test_json_prints_one_object_per_line_for_tools(cli: Cli) -> None:
    """``--json``: every line parses; status changes, step outcomes, deliveries and a final record
    per run, with the virtual time."""
    result = cli("rehearse", INVASION, "--cues", "confirm", "--json")
    assert result.code == 0
    records = [json.loads(line) for line in result.lines]
    kinds = {r["type"] for r in records}
    assert {"status", "step", "delivery", "final"} <= kinds
    assert kinds <= {"status", "phase", "step", "delivery", "final"}
    finals = [r for r in records if r["type"] == "final"]
    assert sorted(r["scope"] for r in finals) == list(SCOPES)
    assert all(r["status"] == "completed" and r["completed"] and r["rehearsal"] for r in finals)
    announcements = [r for r in records if r["type"] == "delivery" and r["kind"] == "announce"]
    cues = [r for r in records if r["type"] == "delivery" and r["kind"] == "cue"]
    assert len(announcements) == 5 * 3 and len(cues) == 3
    herald = next(r for r in announcements if r["scope"] == "borealis" and r["embed"])
    assert herald["pings"] == ["@invasion-alerts"]
    assert {"name": "Where", "value": "The northern gate of borealis", "inline": True} in herald["embed"][
        "fields"
    ]
    outcomes = {r["outcome"] for r in records if r["type"] == "step"}
    # "skipped": the Legion's retreat, which runs only when the Warlord's cue is skipped.
    assert outcomes == {"done", "parked", "confirmed", "skipped"}
    assert max(r["elapsed_seconds"] for r in records) == 30 * 60
    transitions = [
        (r["from"], r["to"]) for r in records if r.get("event") == "run.status" and r["scope"] == "aurora"
    ]
    assert transitions == [
        ("scheduled", "starting"),
        ("starting", "running"),
        ("running", "ending"),
        ("ending", "completed"),
    ]


def test_cues_skip_skips_every_cue_and_the_event_carries_on(cli: Cli) -> None:
    result = cli("rehearse", INVASION, "--cues", "skip")
    assert result.code == 0
    assert result.out.count("skipped by rehearsal") == 3
    assert "confirmed by" not in result.out
    # The Warlord's cue skipped: its arrival is not announced, the retreat is, and why is shown.
    assert "has appeared" not in result.out and result.out.count("falls back from") == 3
    # Neither the spawn nor the call to arms: two steps wait on the confirm, in each of 3 worlds.
    assert result.out.count("skipped: runs only when cue 'Bring out the Shadow Warlord' is confirmed") == 6
    assert "would send to rcon" not in result.out


def test_cues_ask_reads_each_answer_and_asks_again_when_it_is_not_understood(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("perhaps\nskip\n"))
    result = cli("rehearse", TREASURE, "--cues", "ask")
    assert result.code == 0
    assert result.out.count("cue step 4 (Watch for the finder): [c]onfirm, [s]kip or [q]uit?") == 2
    assert "step 4 (Watch for the finder) skipped by rehearsal" in result.out


def test_an_unanswered_cue_ends_the_rehearsal_without_success(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End of input at a prompt must stop, not spin or count as an answer."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    result = cli("rehearse", TREASURE, "--cues", "ask")
    assert result.code == 1
    assert "the input ended before anyone answered" in result.out
    assert "run 1: running (health ok)" in result.out
    assert "rehearsal did not complete: 0 of 1 runs completed" in result.out


def test_a_step_that_fails_for_good_pauses_the_run_and_the_rehearsal_exits_non_zero(
    cli: Cli, tmp_path: Path
) -> None:
    """A channel the server's config lacks fails its step for good, as it would live; with the
    default on_failure (pause) the run pauses, nothing after it goes out, and the exit code says
    the event did not complete."""
    config = write_yaml(tmp_path / "config.yaml", STRICT_CONFIG)
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(
            announce("raid-news", "The raid starts now!"),
            announce("announcements", "You should never see this."),
        ),
    )
    result = cli("rehearse", event, "--config", config, "--cues", "confirm")
    assert result.code == 1
    assert (
        "run 1: step 1 (discord.announce) FAILED: channel 'raid-news' is not one of the channel aliases"
        in result.out
    )
    assert "rehearsal stopped: run 1 is paused at step 1 (discord.announce), which failed" in result.out
    assert "You should never see this." not in result.out
    assert "run 1: paused (health degraded)" in result.out


def test_on_failure_skip_reports_the_failure_and_carries_on(cli: Cli, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", STRICT_CONFIG)
    bad = {**announce("raid-news", "Lost."), "on_failure": "skip"}
    event = write_yaml(tmp_path / "event.yaml", definition(bad, announce("announcements", "Still on!")))
    result = cli("rehearse", event, "--config", config)
    assert result.code == 0
    assert "run 1: step 1 (discord.announce) FAILED: channel 'raid-news'" in result.out
    assert "Still on!" in result.out
    assert "run 1: completed (health degraded)" in result.out


def test_on_failure_abort_run_fails_the_run(cli: Cli, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", STRICT_CONFIG)
    bad = {**announce("raid-news", "Lost."), "on_failure": "abort_run"}
    event = write_yaml(tmp_path / "event.yaml", definition(bad, announce("announcements", "Never.")))
    result = cli("rehearse", event, "--config", config)
    assert result.code == 1
    assert "Never." not in result.out
    assert (
        "run 1: failed (health degraded): step 1 (discord.announce) failed: channel 'raid-news'" in result.out
    )


def test_a_transient_delivery_failure_is_retried_on_the_virtual_clock(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retries are shown with their error and happen 30 s later in virtual time, with the same
    idempotency key, so the message goes out once."""
    real_announce = ConsoleDelivery.announce
    failures = iter([DeliveryError("Discord answered 503 (try again)", transient=True)])

    async def flaky(self: ConsoleDelivery, announcement: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return await real_announce(self, announcement)

    monkeypatch.setattr(ConsoleDelivery, "announce", flaky)
    result = cli("rehearse", TREASURE, "--cues", "confirm")
    assert result.code == 0
    assert (
        "[+00:00:00] run 1: step 1 (First clue) failed (attempt 1): Discord answered 503 (try again); "
        "retrying at +00:00:30" in result.out
    )
    assert "[+00:00:30] run 1: announcement in #event-chat, no ping" in result.out
    assert result.out.count("First clue:") == 1
    assert "run 1: completed (health degraded)" in result.out


def test_mentions_follow_the_config_as_the_discord_delivery_does(cli: Cli, tmp_path: Path) -> None:
    """Only allowed roles ping, other role mentions and @everyone show inert; a cue pings its own
    role. (A ping role the config lacks fails its step: ``test_definition_file_problems``.)"""
    config = write_yaml(tmp_path / "config.yaml", STRICT_CONFIG)
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(
            announce("announcements", "Allowed.", ping_role="event-pings"),
            announce("announcements", "Not allowed.", ping_role="raid-team"),
            announce("announcements", "@everyone come and play!"),
            {"action": "gm.cue", "params": {"instructions": "Go.", "ping_role": "raid-team"}},
        ),
    )
    out = cli("rehearse", event, "--config", config, "--cues", "confirm").out
    assert "announcement in #announcements, pings @event-pings\n" in out
    assert "announcement in #announcements, no ping; @raid-team shown but inert (pings nobody)" in out
    assert "announcement in #announcements, no ping; @everyone shown but inert (pings nobody)" in out
    assert "GM cue in #gm-cues, pings @raid-team" in out


def test_scope_rehearses_one_world_only(cli: Cli) -> None:
    result = cli("rehearse", INVASION, "--scope", "borealis")
    assert result.code == 0
    assert "run 1 borealis: completed" in result.out
    assert "aurora" not in result.out and "celestia" not in result.out


def test_an_unknown_scope_is_refused_with_the_scopes_there_are(cli: Cli) -> None:
    result = cli("rehearse", INVASION, "--scope", "atlantis")
    assert result.code == 1
    assert "shadow-invasion has no scope 'atlantis'; its scopes are: aurora, borealis, celestia" in result.out


def test_an_invalid_definition_is_not_rehearsed(cli: Cli, tmp_path: Path) -> None:
    event = write_yaml(tmp_path / "event.yaml", definition({"action": "discord.shout"}))
    result = cli("rehearse", event)
    assert result.code == 1
    assert "is not a valid event definition" in result.out
    assert "phase 'main', 1st step, field 'action': unknown action 'discord.shout'" in result.out
    assert "created" not in result.out


def test_runs_are_marked_as_rehearsals_in_the_database(cli: Cli, tmp_path: Path) -> None:
    """With --database the history stays, and every run in it carries the rehearsal flag."""
    url = sqlite_url(tmp_path / "kept.sqlite3")
    assert cli("rehearse", INVASION, "--database", url).code == 0
    runs = on_database(url, lambda engine: views.list_runs(engine))
    assert len(runs) == 3
    assert all(run.rehearsal and run.status == "completed" for run in runs)


def test_a_database_with_runs_in_flight_is_refused(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rehearsal ticks every due run in its database; it must never play someone else's."""
    url = sqlite_url(tmp_path / "busy.sqlite3")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert cli("rehearse", TREASURE, "--database", url, "--cues", "ask").code == 1  # left at its cue
    result = cli("rehearse", TREASURE, "--database", url)
    assert result.code == 1
    assert "has 1 run(s) in flight; a rehearsal would advance them too" in result.out
    assert "announcement" not in result.out


def test_runs_sharing_a_concurrency_key_take_turns_and_both_complete(cli: Cli, tmp_path: Path) -> None:
    """A run waiting on a key its holder keeps only rechecks now and then; the rehearsal must
    move the clock on to the holder's next step instead of crawling through the rechecks
    (three days in ten-second rechecks would exhaust the loop bound)."""
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(
            announce("announcements", "Gates open in {scope}."),
            {"action": "core.wait", "params": {"duration": "3d"}},
            announce("announcements", "Gates close in {scope}."),
            scopes=["east", "west"],
            concurrency_key="gates",
            # A run kept waiting past its grace window is missed; let this one wait its turn.
            grace_seconds=7 * 24 * 3600,
        ),
    )
    result = cli("rehearse", event, "-v")
    assert result.code == 0, result.out
    assert "run 2 west: waiting, concurrency key 'rehearsal:gates' is held by run 1" in result.out
    assert re.search(r"^\[\+72:00:00\] run 2 west: scheduled → starting$", result.out, re.M)
    assert re.search(r"^\[\+144:00:00\] run 2 west: ending → completed$", result.out, re.M)
    assert "run 1 east: completed" in result.out and "run 2 west: completed" in result.out


def test_speed_really_waits_a_fraction_of_each_wait() -> None:
    """--speed 60 sleeps a tenth of a second per ten minutes... of real time: 600 s / 60."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    options = RehearsalOptions(file=TREASURE, speed=60, as_json=True)
    assert asyncio.run(rehearse(options, Config(), stream=io.StringIO(), sleep=sleep)) == 0
    assert slept == [pytest.approx(10.0)]

    slept.clear()
    instant = RehearsalOptions(file=TREASURE, as_json=True)
    assert asyncio.run(rehearse(instant, Config(), stream=io.StringIO(), sleep=sleep)) == 0
    assert slept == [], "without --speed the virtual clock jumps and nothing sleeps"


def test_a_rehearsal_that_goes_round_in_circles_gives_up() -> None:
    stream = io.StringIO()
    options = RehearsalOptions(file=INVASION, max_iterations=1)
    assert asyncio.run(rehearse(options, Config(), stream=stream)) == 1
    assert "gave up after 1 ticks without every run ending" in stream.getvalue()


def test_a_mirrored_event_shows_its_events_tab_entry_and_creates_none(cli: Cli, tmp_path: Path) -> None:
    """A rehearsal never lists anything in the Events tab, but its transcript says what would
    be listed (name, start-end with the zone, location) and each status the entry would take."""
    config = write_yaml(tmp_path / "config.yaml", STRICT_CONFIG)
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(
            announce("announcements", "Quiz time!"),
            duration="1h30m",
            discord_event={"location": "The Lounge"},
        ),
    )
    result = cli("rehearse", event, "--config", config, "--cues", "confirm")
    assert result.code == 0
    listed = re.compile(
        r"run 1: Events tab \(not created in a rehearsal\): 'Test event', "
        r"\w{3} \d{2} \w{3} \d{4} \d{2}:\d{2}–\d{2}:\d{2} UTC, at The Lounge$",
        re.M,
    )
    assert listed.search(result.out), result.out
    assert "Events tab entry would be" not in result.out, "the entry's status moves are behind -v"
    verbose = cli("rehearse", event, "--config", config, "--cues", "confirm", "-v")
    assert listed.search(verbose.out), verbose.out
    assert "run 1: Events tab entry would be active (not in a rehearsal)" in verbose.out
    assert "run 1: Events tab entry would be completed (not in a rehearsal)" in verbose.out
