"""The rehearsal's words (issue 12): one numbering for steps (a step's id with its label, as
``runner.views.step_name`` names it, the same in the rehearsal, ``runs`` and Discord), a quiet
transcript by default (the engine's bookkeeping behind ``-v``), phases that end when the wait
ending them does, and a cue prompt that says which keys work."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import EXAMPLES, Cli, announce, sqlite_url, write_yaml
from tests.support.definitions import event, phase

INVASION = EXAMPLES / "invasion.yaml"
TREASURE = EXAMPLES / "treasure-hunt.yaml"
STRICT_CONFIG = {
    "channels": {"announcements": 100000000000000101, "gm-cues": 100000000000000104},
    "gm_channel": "gm-cues",
}
STAMPED = re.compile(r"^\[\+(\d{2}):(\d{2}):(\d{2})\] (.*)$")


def stamped(lines: list[str]) -> list[tuple[int, str]]:
    """Each timed line as (seconds since the start, text)."""
    found = [STAMPED.match(line) for line in lines]
    return [(int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]), m[4]) for m in found if m]


def failing_event(tmp_path: Path) -> Path:
    """The failing step is the event's second (id 2) but the first of its phase (place 0)."""
    return write_yaml(
        tmp_path / "event.yaml",
        event(
            "gates",
            phase("warmup", announce("announcements", "Warm up!"), label="Warm up"),
            phase(
                "main",
                {**announce("raid-news", "The raid starts now!"), "label": "Open the gates"},
                announce("announcements", "You should never see this."),
                label="Main",
            ),
            title="Gates",
        ),
    )


@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["quiet", "verbose"])
def test_defect_one_failure_is_not_called_step_1_then_step_2(
    cli: Cli, tmp_path: Path, verbose: tuple[str, ...]
) -> None:
    """Before: one failed step was "main step 0 (Open the gates) FAILED" on one line (its place
    in its phase) and "step 2 (discord.announce) failed" on the next ones (its id, with its
    action for a label), so a moderator read two steps. Now every line, in the rehearsal and in
    ``runs``, names it "step 2 (Open the gates)": the number ``/event skip`` takes."""
    config = write_yaml(tmp_path / "config.yaml", STRICT_CONFIG)
    url = sqlite_url(tmp_path / "kept.sqlite3")
    result = cli("rehearse", failing_event(tmp_path), "--config", config, "--database", url, *verbose)
    assert result.code == 1
    lines = [text for _, text in stamped(result.lines)]
    # Every line about the failure (with -v: the health and the pause too) names one step.
    named = [line for line in lines if re.search(r"fail|pause|degraded", line, re.I)]
    assert len(named) >= (3 if not verbose else 5), named
    assert {int(n) for line in named for n in re.findall(r"\bstep (\d+)", line)} == {2}, named
    assert set(re.findall(r"\bstep 2 \(([^)]*)\)", result.out)) == {"Open the gates"}
    failed = next(i for i, line in enumerate(lines) if "FAILED" in line)
    assert lines[failed] == (
        "run 1: step 2 (Open the gates) FAILED: channel 'raid-news' is not one of the channel aliases "
        "in config (channels: announcements, gm-cues)"
    )
    stopped = next(i for i, line in enumerate(lines) if line.startswith("rehearsal stopped"))
    assert lines[stopped].startswith(
        "rehearsal stopped: run 1 is paused at step 2 (Open the gates), which failed."
    )
    if not verbose:
        assert stopped == failed + 1, "the failure, then why the rehearsal stopped: nothing between"
    assert lines[-1] == (
        "run 1: paused (health degraded): step 2 (Open the gates) failed: channel 'raid-news' is not "
        "one of the channel aliases in config (channels: announcements, gm-cues)"
    )
    assert "main step 0" not in result.out and "(discord.announce) failed" not in result.out

    listed = cli("runs", "--database", url)
    assert listed.code == 0
    assert "step 2 (Open the gates) failed: channel 'raid-news'" in listed.out
    assert "discord.announce" not in listed.out


def test_the_default_transcript_leaves_the_engines_bookkeeping_to_verbose(cli: Cli) -> None:
    """By default a moderator reads what players and GMs would see, the waits and how each run
    ended: no status transitions, no "created", no step "done" beyond a wait's. ``-v`` prints
    them too, and the quiet transcript is the verbose one with those lines left out."""
    quiet = cli("rehearse", INVASION, "--scope", "aurora", "--cues", "confirm")
    loud = cli("rehearse", INVASION, "--scope", "aurora", "--cues", "confirm", "-v")
    assert quiet.code == loud.code == 0
    transitions = ["scheduled → starting", "starting → running", "running → ending", "ending → completed"]
    for shift in transitions:
        assert f"run 1 aurora: {shift}" not in quiet.out
        assert f"run 1 aurora: {shift}" in loud.out
    for line in (
        "run 1 aurora: created (rehearsal run)",
        "run 1 aurora: step 1 (Herald the invasion) done\n",
        "run 1 aurora: step 6 (Bring out the Shadow Warlord) is waiting for a GM to confirm or skip",
        "run 1 aurora: phase 'closing' (Victory and thanks) completed",
    ):
        assert line not in quiet.out
        assert line in loud.out
    for line in (
        "run 1 aurora: phase 'battle' (Hold the line) started",
        "run 1 aurora: announcement in #announcements, pings @invasion-alerts",
        "│ Spawn the Shadow Warlord in aurora",
        "run 1 aurora: step 3 (Let defenders gather) done; what comes next waits 10m (until +00:10:00)",
        "run 1 aurora: step 6 (Bring out the Shadow Warlord) confirmed by rehearsal",
        "[+00:30:00] run 1 aurora: completed (health ok)",
    ):
        assert line in quiet.out and line in loud.out
    remaining = iter(loud.lines)
    assert all(line in remaining for line in quiet.lines), "quiet is verbose with lines left out"


def test_defect_a_phase_ended_by_a_wait_is_shown_completed_only_after_the_wait(cli: Cli) -> None:
    """Before: "phase 'opening' completed" and "phase 'battle' started" were stamped +00:00:00,
    straight after "waits 10m (until +00:10:00)": the engine closes a phase whose last step is a
    wait at once, carrying the wait on the next phase's first step. Now the rehearsal shows both
    when the wait has passed (text and JSON), and never before the wait's line."""
    lines = stamped(cli("rehearse", INVASION, "--scope", "aurora", "--cues", "confirm", "-v").lines)
    waits = next(i for i, (_, text) in enumerate(lines) if "step 3 (Let defenders gather) done; what" in text)
    completed = next(
        i for i, (_, text) in enumerate(lines) if "phase 'opening'" in text and "completed" in text
    )
    started = next(i for i, (_, text) in enumerate(lines) if "phase 'battle' (Hold the line) started" in text)
    assert lines[waits][0] == 0
    assert waits < completed < started
    assert lines[completed][0] == lines[started][0] == 10 * 60
    assert lines[started + 1] == (10 * 60, "run 1 aurora: announcement in #announcements, no ping"), (
        "the next phase begins before what it sends"
    )
    # The closing phase is entered after a cue and an announcement, not a wait: at once.
    assert (25 * 60, "run 1 aurora: phase 'battle' (Hold the line) completed") in lines

    quiet = stamped(cli("rehearse", INVASION, "--scope", "aurora", "--cues", "confirm").lines)
    assert (10 * 60, "run 1 aurora: phase 'battle' (Hold the line) started") in quiet

    records = [json.loads(line) for line in cli("rehearse", INVASION, "--scope", "aurora", "--json").lines]
    phases = {(r["event"], r["phase"]): r["elapsed_seconds"] for r in records if r["type"] == "phase"}
    assert phases[("phase.completed", "opening")] == phases[("phase.started", "battle")] == 10 * 60
    assert phases[("phase.completed", "battle")] == 25 * 60


def test_defect_a_wrong_key_at_the_cue_prompt_says_which_keys_work(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: an answer the prompt did not know was met with the same prompt again, silently.
    Now it is told which keys work (an empty line too), then asked again; the prompt and the
    cue card name the cue's step as every other line does."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("x\n\ns\n"))
    result = cli("rehearse", TREASURE, "--cues", "ask")
    assert result.code == 0
    keys = "press c to confirm, s to skip, or q to quit the rehearsal"
    assert f"'x' is not an answer here: {keys}\n" in result.out
    assert f"\n{keys}\n" in result.out, "an empty answer is told the keys too"
    assert (
        result.out.count("GM for run 1, cue step 4 (Watch for the finder): [c]onfirm, [s]kip or [q]uit?") == 3
    )
    assert "│ The Lost Chest of Captain Marlow · The hunt · step 4 · rehearsal" in result.out
    assert "run 1: step 4 (Watch for the finder) skipped by rehearsal" in result.out
