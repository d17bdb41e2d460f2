"""The tests never read the config.yaml a user made in the repository root (issue 26 item 5):
setup.md has them write one for their own server, and ``python3 scripts/test.py`` then failed
``test_the_demo_rehearses_the_invasion_to_completion`` on its aliases. The bot itself still reads
./config.yaml by default (tests/cli/test_database_commands.py pins that)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import main
from cli.common import config_path

REPO = Path(__file__).resolve().parents[1]
# A config.yaml for someone's own server: other aliases than the examples use, and a guild id.
USERS_CONFIG = "guild_id: 123456789012345678\nchannels: {general: 1}\nroles: {members: 2}\n"


def test_defect_a_config_yaml_in_the_working_directory_is_not_read_by_a_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a command a test ran without --config (``migrate --database URL``,
    ``validate FILE``) read ./config.yaml from the checkout, so a user's own config failed the
    suite. Now: with a config.yaml that names none of the example's aliases in the working
    directory, the example validates against the built-in defaults, as in a clean checkout."""
    (tmp_path / "config.yaml").write_text(USERS_CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert config_path(None) is None
    assert main(["validate", str(REPO / "examples" / "invasion.yaml")]) == 0, capsys.readouterr().out


def test_a_broken_config_yaml_in_the_working_directory_does_not_fail_a_command_a_test_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text("guild_id: [unclosed\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["migrate", "--database", f"sqlite+aiosqlite:///{tmp_path / 'events.sqlite3'}"]) == 0
