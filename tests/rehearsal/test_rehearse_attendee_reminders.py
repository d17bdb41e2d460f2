"""A reminder written ``to: attendees`` in the rehearsal (issue 28, item 5): it is shown at its
virtual time before the start as the DM each seated member would get, its placeholders filled in,
through the action and delivery interface a live occurrence uses; a rehearsal has no sign-ups,
so it says that nobody is seated rather than pretending to send."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Cli, announce, definition, write_yaml
from tests.cli.test_defects_reminder_aliases import CONFIG
from tests.support import definitions as factory

DM_AND_CHANNEL = definition(
    announce("announcements", "The raid begins!"),
    key="weekly-raid",
    schedule=factory.cron("0 20 * * FRI"),
    signup={"options": {"going": 5}, "channel": "announcements"},
    reminders=[
        {"before": "1h", "to": "attendees", "content": "{title} starts {start_relative}: bring potions!"},
        {"before": "15m", "channel": "announcements", "content": "Fifteen minutes!"},
    ],
)


def test_rehearse_shows_the_dm_each_seated_member_would_get(cli: Cli, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", DM_AND_CHANNEL)
    result = cli("rehearse", event, "--config", config)
    assert result.code == 0, result.out
    lines = result.lines
    dm = lines.index(
        "[-01:00:00] Reminder to attendees, 1h before: DM to each member seated in the run "
        "(nobody is seated in a rehearsal), unless they turned reminders off"
    )
    assert lines[dm + 1].strip().startswith("✉ Test event starts <t:")
    assert lines[dm + 1].endswith("(in 1 hour): bring potions!")
    channel = lines.index("[-00:15:00] Reminder, 15m before: announcement in #announcements, no ping")
    assert dm < channel
    assert "rehearsal completed: 1 of 1 runs completed" in result.out
