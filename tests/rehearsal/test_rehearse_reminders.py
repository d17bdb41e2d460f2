"""Issue 20, section 0, in the rehearsal: a rehearsal run sends no reminders (it starts now, as a
manual start does), so a reminder's typo first failed an hour before the live event. Now
``rehearse`` sends each reminder at its virtual time before the start (``-01:00:00``), through
the action and the delivery a live occurrence uses, and says which config it checked against."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Cli, write_yaml
from tests.cli.test_defects_reminder_aliases import CONFIG, NO_CONFIG, TYPOS, with_reminders

RIGHT = with_reminders(
    {"before": "1h", "channel": "announcements", "content": "{title} starts {start_relative}"},
    {"before": "15m", "channel": "announcements", "content": "Fifteen minutes!", "ping_role": "raiders"},
)


def test_defect_reminder_alias_typo_passes_rehearse_which_now_fails_it_at_its_virtual_time(
    cli: Cli, tmp_path: Path
) -> None:
    """Before: the rehearsal never sent the reminders and ended "completed". Now each is sent
    at its time before the start; an unknown channel or ping role fails it there, by name, the
    event still starts (as live: a failed reminder never stops it), and the exit code is 1."""
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", TYPOS)
    result = cli("rehearse", event, "--config", config)
    assert result.code == 1, result.out
    assert (
        "[-01:00:00] Reminder, 1h before FAILED: channel 'anouncements' is not one of the channel "
        "aliases in config (channels: announcements, gm-cues); did you mean 'announcements'?"
    ) in result.out
    assert (
        "[-00:15:00] Reminder, 15m before FAILED: ping role 'raidres' is not one of the role aliases in config"
    ) in result.out
    assert "[+00:00:00] run 1: announcement in #announcements, pings @raiders" in result.out
    assert "2 reminder(s) failed (shown above): a live occurrence would not send them" in result.out
    assert "rehearsal completed" not in result.out


def test_rehearse_shows_each_reminder_at_its_virtual_time_before_the_start(cli: Cli, tmp_path: Path) -> None:
    """Each reminder is shown as players would read it, stamped with its time before the start
    (``+00:00:00``), its placeholders filled in for that start; the steps follow from the start."""
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", RIGHT)
    result = cli("rehearse", event, "--config", config)
    assert result.code == 0, result.out
    lines = result.lines
    first = lines.index("[-01:00:00] Reminder, 1h before: announcement in #announcements, no ping")
    assert lines[first + 1].strip().startswith("Test event starts <t:")
    assert lines[first + 1].endswith("(in 1 hour)")
    second = lines.index("[-00:15:00] Reminder, 15m before: announcement in #announcements, pings @raiders")
    assert lines[second + 1].strip() == "@raiders Fifteen minutes!"
    start = lines.index("[+00:00:00] run 1: announcement in #announcements, pings @raiders")
    assert first < second < start
    assert "rehearsal completed: 1 of 1 runs completed" in result.out


def test_rehearse_sends_the_reminders_of_each_scope_and_says_so_in_json(cli: Cli, tmp_path: Path) -> None:
    event = write_yaml(tmp_path / "event.yaml", {**RIGHT, "scopes": ["aurora", "borealis"]})
    result = cli("rehearse", event, "--json")
    assert result.code == 0, result.out
    records = [json.loads(line) for line in result.lines]
    sent = [
        (r["scope"], r["before_seconds"], r["elapsed_seconds"]) for r in records if r["type"] == "reminder"
    ]
    assert sent == [
        ("aurora", 3600.0, -3600.0),
        ("borealis", 3600.0, -3600.0),
        ("aurora", 900.0, -900.0),
        ("borealis", 900.0, -900.0),
    ]
    assert all(r["outcome"] == "sent" for r in records if r["type"] == "reminder")
    shown = [r["content"] for r in records if r["type"] == "delivery" and r["elapsed_seconds"] == -900.0]
    assert shown == ["Fifteen minutes!", "Fifteen minutes!"]


def test_rehearse_says_which_config_it_read(cli: Cli, tmp_path: Path) -> None:
    """As ``validate``: the first line names the config file, or says there was none and the
    aliases went unchecked (the typos are then sent as written, and the rehearsal completes)."""
    event = write_yaml(tmp_path / "event.yaml", TYPOS)
    result = cli("rehearse", event)
    assert result.lines[0] == NO_CONFIG
    assert result.code == 0, result.out
    write_yaml(tmp_path / "config.yaml", CONFIG)  # the test runs in tmp_path: found as ./config.yaml
    result = cli("rehearse", event)
    assert result.lines[0] == "config: config.yaml (channel and role aliases checked against it)"
    assert result.code == 1


def test_an_unknown_scope_sends_no_reminder_and_is_refused_at_the_start(cli: Cli, tmp_path: Path) -> None:
    event = write_yaml(tmp_path / "event.yaml", {**RIGHT, "scopes": ["aurora"]})
    result = cli("rehearse", event, "--scope", "nope")
    assert result.code == 1
    assert "Reminder" not in result.out
    assert "[+00:00:00] cannot start the rehearsal: weekly-raid has no scope 'nope'" in result.out
