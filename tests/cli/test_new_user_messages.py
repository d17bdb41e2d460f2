"""What ``python -m bot validate`` says to a new user's usual mistakes (issue 26 item 5): each
names what is wrong, where, and the fix, where it used to say something true but unhelpful."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli, write_yaml

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "config.example.yaml"
HEAD = """\
key: x
title: X
schedule: manual
phases:
  - key: main
    label: Main
    steps:
"""

CASES = [
    (
        "a bare on as a params key",
        HEAD + "      - action: discord.thread\n        params: {name: chat, on: Call}\n",
        ["field 'params': params: the key True is not text", 'so write it in quotes ("on": …)'],
    ),
    (
        "an unquoted ': ' in text",
        HEAD + "      - action: discord.announce\n        params:\n          channel: announcements\n"
        "          content: Note: bring snacks\n",
        ["line 11", "text with ': ' in it must be in quotes"],
    ),
    (
        "one stray space before a key",
        "key: x\ntitle: X\n schedule: manual\n",
        ["line 3", "a key must line up with the keys above it"],
    ),
    (
        "a six-field cron",
        "key: x\ntitle: X\nschedule: {cron: '0 0 20 * * FRI', timezone: UTC}\n"
        "phases: [{key: main, label: Main, steps: [{action: core.wait, params: {duration: 1m}}]}]\n",
        ["field 'schedule.cron'", "use five fields (minute hour day-of-month month day-of-week)"],
    ),
    (
        "a four-field cron",
        "key: x\ntitle: X\nschedule: {cron: '0 20 * FRI', timezone: UTC}\n"
        "phases: [{key: main, label: Main, steps: [{action: core.wait, params: {duration: 1m}}]}]\n",
        ["field 'schedule.cron'", "use five fields (minute hour day-of-month month day-of-week)"],
    ),
    (
        "a channel written with its #",
        HEAD + "      - action: discord.announce\n        params:\n          channel: #announcements\n"
        "          content: hi\n",
        ["field 'params.channel'", "a # after the colon starts a YAML comment"],
    ),
    (
        "a channel written with its # inside braces",
        HEAD + "      - action: discord.announce\n        params: {channel: #announcements, content: hi}\n",
        ["line 9: a # after a space starts a YAML comment", "write '#name' in quotes"],
    ),
    (
        "the sign-up's channel written with its #",
        HEAD.replace("phases:", "signup:\n  channel: #raids\n  options: [going]\nphases:")
        + "      - action: core.wait\n        params: {duration: 1m}\n",
        ["field 'signup.channel': empty (a # after the colon starts a YAML comment"],
    ),
    (
        "a role given by its name",
        HEAD + "      - action: discord.announce\n        params: {channel: announcements, content: hi, "
        "ping_role: '@Quiz Fans'}\n",
        ["field 'params.ping_role'", "the config's role aliases: ", "did you mean 'quiz-fans'?"],
    ),
    (
        "a duration in an unknown unit",
        HEAD + "      - action: core.wait\n        params: {duration: 2x}\n",
        ["'2x' is not a duration", "'2d'"],
    ),
    (
        "an alias typo names its field",
        HEAD + "      - action: discord.announce\n        params: {channel: anouncements, content: hi}\n",
        ["1st step, field 'params.channel': channel 'anouncements' is not one of the channel aliases"],
    ),
    (
        "a schema problem and an alias typo in one file",
        "key: x\ntitle: X\nschedule: manual\nbogus: 1\n"
        + HEAD.split("schedule: manual\n")[1]
        + "      - action: discord.announce\n        params: {channel: anouncements, content: hi}\n",
        ["field 'bogus': unknown field 'bogus'", "field 'params.channel': channel 'anouncements'"],
    ),
]


@pytest.mark.parametrize(
    ("text", "said"), [(text, said) for _, text, said in CASES], ids=[c[0] for c in CASES]
)
def test_a_new_users_mistake_is_answered_with_the_fix(
    cli: Cli, tmp_path: Path, text: str, said: list[str]
) -> None:
    result = cli("validate", write_yaml(tmp_path / "event.yaml", text), "--config", EXAMPLE_CONFIG)
    assert result.code == 1
    for words in said:
        assert words in result.out, result.out


def test_defect_a_bare_on_is_reported_once_with_its_fix(cli: Cli, tmp_path: Path) -> None:
    """Before: beside the line that says to quote "on", the thread action's own check added
    "field 'params.1': keys should be strings", a second problem at a field the author never
    wrote. Now the key is reported once, and the rest of the step's params are still checked."""
    text = (
        HEAD
        + "      - action: discord.thread\n        params: {name: chat, on: Call, auto_archive_minutes: 5}\n"
    )
    result = cli("validate", write_yaml(tmp_path / "event.yaml", text), "--config", EXAMPLE_CONFIG)
    assert result.code == 1
    assert "2 problems" in result.out, result.out
    assert 'so write it in quotes ("on": …)' in result.out
    assert "field 'params.auto_archive_minutes'" in result.out
    assert "keys should be strings" not in result.out


def test_defect_a_phase_key_that_is_a_list_does_not_crash_the_alias_check(cli: Cli, tmp_path: Path) -> None:
    """Before: the alias check that reports a typo beside a schema problem put the phase's raw
    key in a set, so ``key: [main]`` ended validate with a TypeError (the definition fuzz test
    found it). Now the phase is named by its place, as the schema's problem names it."""
    text = HEAD.replace("  - key: main\n", "  - key: [main]\n") + (
        "      - action: discord.announce\n        params: {channel: anouncements, content: hi}\n"
    )
    result = cli("validate", write_yaml(tmp_path / "event.yaml", text), "--config", EXAMPLE_CONFIG)
    assert result.code == 1
    assert "phase '#0', field 'key': must be text, not a list" in result.out
    assert "phase '#0', 1st step, field 'params.channel': channel 'anouncements'" in result.out


def test_defect_a_schema_problem_hid_the_reminders_and_the_signups_alias_typos(
    cli: Cli, tmp_path: Path
) -> None:
    """Before: beside a schema problem only the steps' aliases were checked, so a typo in a
    reminder's or the sign-up's channel showed only after the first was fixed. Now all come in
    one run, each at its field."""
    text = (
        "key: x\ntitle: X\nbogus: 1\nschedule: {cron: '0 20 * * FRI', timezone: UTC}\n"
        "reminders:\n  - {before: 1h, channel: anouncements, content: soon, ping_role: quiz-fanz}\n"
        "signup: {channel: raidz, options: [going]}\n" + HEAD.split("schedule: manual\n")[1]
    ) + "      - action: core.wait\n        params: {duration: 1m}\n"
    result = cli("validate", write_yaml(tmp_path / "event.yaml", text), "--config", EXAMPLE_CONFIG)
    assert result.code == 1
    assert "4 problems" in result.out, result.out
    for said in (
        "field 'bogus': unknown field 'bogus'",
        "field 'reminders.0.channel': channel 'anouncements' is not one of the channel aliases",
        "field 'reminders.0.ping_role': ping role 'quiz-fanz' is not one of the role aliases",
        "field 'signup.channel': channel 'raidz' is not one of the channel aliases",
    ):
        assert said in result.out, result.out
