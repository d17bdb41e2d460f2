"""Issue 8, the definition-file side: ``validate FILE``, ``publish FILE`` and ``rehearse FILE``
(defects 6 and 13). Each test is named for the defect it pins and says what happened before and
what must happen now. Driven through ``cli.main`` as ``python -m bot`` drives it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli, announce, definition, sqlite_url, write_yaml
from tests.cli.test_database_commands import stored_versions

WAIT = {"action": "core.wait", "params": {"duration": 5}}
LOCATED = re.compile(r"line \d+, column \d+: ")

# Three files that each used to end in a traceback (146 of 2,045 fuzzed files did).
UNREADABLE: dict[str, bytes] = {
    "not UTF-8": b"key: latin\ntitle: Caf\xe9 night\nphases: []\n",
    "offset of 25 h": (
        b"key: late\ntitle: Late\nschedule: {once: 2026-12-05T19:00:00+25:00}\n"
        b"phases:\n  - key: main\n    label: Main\n    steps: [{action: core.wait, params: {duration: 5}}]\n"
    ),
    "a 5,000-digit integer": (
        b"key: huge\ntitle: Huge\ngrace_seconds: " + b"9" * 5000 + b"\n"
        b"phases:\n  - key: main\n    label: Main\n    steps: [{action: core.wait, params: {duration: 5}}]\n"
    ),
}
WHAT = {
    "not UTF-8": "not UTF-8",
    "offset of 25 h": "less than 24 hours",
    "a 5,000-digit integer": "4,300 digits",
}


@pytest.fixture
def database(cli: Cli, tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "eventbot.sqlite3")
    assert cli("migrate", "--database", url).code == 0
    return url


@pytest.mark.parametrize("command", ["validate", "publish", "rehearse"])
@pytest.mark.parametrize("case", list(UNREADABLE))
def test_defect_06_an_unreadable_definition_file_is_one_located_line_not_a_traceback(
    cli: Cli, tmp_path: Path, database: str, command: str, case: str
) -> None:
    """Before: ``validate`` (and ``publish``, ``rehearse``) died with a traceback on a file that
    is not UTF-8 (``UnicodeDecodeError``), on ``+25:00`` (``ValueError`` from ``datetime``) and
    on an integer of more than 4,300 digits. Now each is one problem line naming the file, the
    line and the column, exit code 1, and nothing is stored."""
    path = tmp_path / "event.yaml"
    path.write_bytes(UNREADABLE[case])
    argv: list[Any] = [command, path]
    if command == "publish":
        argv += ["--database", database]
    result = cli(*argv)
    assert result.code == 1, result
    assert "Traceback" not in result.out + result.err
    problems = [line.strip() for line in result.lines if line.strip().startswith(f"{path}: ")]
    assert len(problems) == 1, result.out
    assert LOCATED.search(problems[0]) and WHAT[case] in problems[0], problems[0]
    if command == "publish":
        assert stored_versions(database) == []


# ── 13. validate and publish ignore the config ──────────────────────────────

CONFIG = {
    "guild_id": 100000000000000001,
    "channels": {"announcements": 100000000000000101, "gm-cues": 100000000000000104},
    "roles": {"raiders": 100000000000000201, "game-masters": 100000000000000202},
    "announce": {"allowed_ping_roles": ["raiders"]},
}


def broken_for_the_config() -> dict[str, Any]:
    """Valid on its own; against ``CONFIG``: an unknown channel, a cue with no channel while the
    config has no ``gm_channel``, and an unknown ping role."""
    return definition(
        announce("town-square", "The raid begins!"),
        {"action": "gm.cue", "params": {"instructions": "Open the gates", "ping_role": "game-masters"}},
        announce("announcements", "Raiders, to arms!", ping_role="raidres"),
        WAIT,
    )


def test_defect_13_validate_checks_every_alias_against_the_config_all_problems_at_once(
    cli: Cli, tmp_path: Path
) -> None:
    """Before: a channel alias, a ``gm_channel`` or a ping role the config did not have passed
    ``validate`` (with ``--config`` too); the event failed only when that step ran live. Now,
    with a config in effect, every alias is checked against it and each unknown one is a
    problem at its phase and step, all of them in one report."""
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", broken_for_the_config())
    result = cli("validate", event, "--config", config)
    assert result.code == 1
    assert "3 problems" in result.out, result.out
    assert (
        "phase 'main', 1st step, field 'params.channel': channel 'town-square' is not one of the channel aliases in config"
        in result.out
    )
    assert (
        "phase 'main', 2nd step, field 'params.channel': no GM channel: the step names none and gm_channel is not configured"
        in result.out
    )
    assert (
        "phase 'main', 3rd step, field 'params.ping_role': ping role 'raidres' is not one of the role aliases in config"
        in result.out
    )


def test_defect_13_the_config_is_found_as_every_other_command_finds_it(cli: Cli, tmp_path: Path) -> None:
    """The same resolution as every command: ``./config.yaml`` when there is no ``--config``.
    Without any config (the built-in defaults name no server), aliases are not checked, so the
    quick start still validates anything well formed."""
    event = write_yaml(tmp_path / "event.yaml", broken_for_the_config())
    assert cli("validate", event).code == 0, "no config: nothing to check aliases against"
    write_yaml(tmp_path / "config.yaml", CONFIG)  # the test runs in tmp_path
    result = cli("validate", event)
    assert result.code == 1 and "3 problems" in result.out, result.out


def test_defect_13_publish_refuses_unknown_aliases_and_stores_nothing(
    cli: Cli, tmp_path: Path, database: str
) -> None:
    """Before: such a definition published, and a scheduled run of it failed live. Now publish
    checks the same as validate and, with any problem, stores nothing."""
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", broken_for_the_config())
    result = cli("publish", event, "--config", config, "--database", database)
    assert result.code == 1
    assert "ping role 'raidres' is not one of the role aliases in config" in result.out
    assert "nothing was published" in result.out
    assert stored_versions(database) == []
    fixed = write_yaml(
        tmp_path / "fixed.yaml",
        definition(announce("announcements", "Raiders, to arms!", ping_role="raiders"), key="fixed"),
    )
    assert cli("publish", fixed, "--config", config, "--database", database).code == 0
    assert stored_versions(database) == [("fixed", 1)]


def test_defect_13_an_unknown_ping_role_fails_its_step_in_a_rehearsal_not_dropped(
    cli: Cli, tmp_path: Path
) -> None:
    """Before: an unknown ``ping_role`` was silently dropped at delivery and the rehearsal ended
    "completed (health ok)". Now the delivery refuses the step (terminal, naming the role), so
    the run does not pass for healthy."""
    config = write_yaml(tmp_path / "config.yaml", {**CONFIG, "gm_channel": "gm-cues"})
    event = write_yaml(
        tmp_path / "event.yaml", definition(announce("announcements", "To arms!", ping_role="raidres"))
    )
    result = cli("rehearse", event, "--config", config, "--cues", "confirm")
    assert result.code == 1
    assert "ping role 'raidres' is not one of the role aliases in config" in result.out
    assert "completed (health ok)" not in result.out
