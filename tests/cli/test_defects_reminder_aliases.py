"""Issue 20, section 0: a reminder's ``channel`` or ``ping_role`` typo passed ``validate``,
``publish`` (with the config) and the ``/event start`` preflight, which walked only the phases'
steps; a rehearsal sends no reminders, so the typo first failed an hour before the live event.
Now every check walks the reminders with the steps (``runner.preflight.performed``). Driven
through ``cli.main`` as ``python -m bot`` drives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli, announce, definition, sqlite_url, write_yaml
from tests.cli.test_database_commands import stored_versions
from tests.support import definitions as factory

CONFIG = {
    "guild_id": 100000000000000001,
    "channels": {"announcements": 100000000000000101, "gm-cues": 100000000000000104},
    "roles": {"raiders": 100000000000000201},
    "announce": {"allowed_ping_roles": ["raiders"]},
}
NO_CONFIG = "no config: channel and role aliases not checked"


def with_reminders(*reminders: dict[str, Any], key: str = "weekly-raid") -> dict[str, Any]:
    """A weekly event whose one step is right for ``CONFIG``: only its reminders can be wrong."""
    return definition(
        announce("announcements", "The raid begins!", ping_role="raiders"),
        key=key,
        schedule=factory.cron("0 20 * * FRI"),
        reminders=list(reminders),
    )


TYPOS = with_reminders(
    {"before": "1h", "channel": "anouncements", "content": "The raid starts in an hour"},
    {"before": "15m", "channel": "announcements", "content": "Fifteen minutes!", "ping_role": "raidres"},
)


@pytest.fixture
def database(cli: Cli, tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "eventbot.sqlite3")
    assert cli("migrate", "--database", url).code == 0
    return url


def test_defect_reminder_alias_typo_passes_validate_with_the_config(cli: Cli, tmp_path: Path) -> None:
    """Before: ``validate --config`` said ok. Now each reminder's unknown alias is a problem
    at ``reminders.<index>.<field>``, naming the alias and the known ones, with a "did you mean"."""
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", TYPOS)
    result = cli("validate", event, "--config", config)
    assert result.code == 1, result.out
    assert "2 problems" in result.out, result.out
    assert (
        f"{event}, field 'reminders.0.channel': channel 'anouncements' is not one of the channel aliases "
        "in config (channels: announcements, gm-cues)"
    ) in result.out
    assert "did you mean 'announcements'" in result.out
    assert (
        f"{event}, field 'reminders.1.ping_role': ping role 'raidres' is not one of the role aliases in config"
    ) in result.out


def test_defect_reminder_alias_typo_passes_publish_which_now_stores_nothing(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    """Before: it published, and the first scheduled occurrence's reminder failed live. Now
    publish refuses it with the same problems and stores nothing; fixed, it publishes."""
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", TYPOS)
    result = cli("publish", event, "--config", config, "--database", database)
    assert result.code == 1, result.out
    assert "field 'reminders.0.channel': channel 'anouncements'" in result.out
    assert "field 'reminders.1.ping_role': ping role 'raidres'" in result.out
    assert "nothing was published" in result.out
    assert stored_versions(database) == []
    fixed = write_yaml(
        tmp_path / "fixed.yaml",
        with_reminders({"before": "1h", "channel": "announcements", "content": "An hour to go"}),
    )
    assert cli("publish", fixed, "--config", config, "--database", database).code == 0
    assert stored_versions(database) == [("weekly-raid", 1)]


def test_validate_says_which_config_it_read(cli: Cli, tmp_path: Path) -> None:
    """What ``validate`` checked aliases against is never a guess: the config file it read, or
    that there was none and the aliases went unchecked (the typos then pass, as they must)."""
    event = write_yaml(tmp_path / "event.yaml", TYPOS)
    result = cli("validate", event)
    assert result.code == 0, result.out
    assert result.lines[0] == NO_CONFIG
    write_yaml(tmp_path / "config.yaml", CONFIG)  # the test runs in tmp_path: found as ./config.yaml
    result = cli("validate", event)
    assert result.code == 1
    assert result.lines[0] == "config: config.yaml (channel and role aliases checked against it)"
    other = write_yaml(tmp_path / "other.yaml", CONFIG)
    assert cli("validate", event, "--config", other).lines[0] == (
        f"config: {other} (channel and role aliases checked against it)"
    )
