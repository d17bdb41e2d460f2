"""``python -m bot validate``: every problem, each naming its file, phase, step and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import EXAMPLE_CONFIG, EXAMPLE_FILES, EXAMPLES, Cli, definition, write_yaml
from tests.support.definitions import event, phase, wait

WAIT = wait("1m")


def two_phases(first_key: str = "opening", second_key: str = "closing", **fields: Any) -> dict[str, Any]:
    return event(
        "broken",
        phase(first_key, WAIT, WAIT, label="Opening"),
        phase(second_key, WAIT, label="Closing"),
        **fields,
    )


def with_step(step: dict[str, Any]) -> dict[str, Any]:
    spec = two_phases()
    spec["phases"][0]["steps"] = [WAIT, step]
    return spec


# (case, the definition, what the report must say). Each expectation names the place.
BROKEN: list[tuple[str, Any, list[str]]] = [
    (
        "unknown action",
        with_step({"action": "discord.shout", "params": {"text": "hi"}}),
        ["phase 'opening', 2nd step, field 'action': unknown action 'discord.shout'", "known: core.wait"],
    ),
    (
        "bad params",
        with_step({"action": "discord.announce", "params": {"channel": "Town Square!", "content": "hi"}}),
        [
            "phase 'opening', 2nd step, field 'params.channel': 'Town Square!' is not a channel: name a "
            "channel alias from the config (lower case letters, digits, - and _"
        ],
    ),
    (
        "a param the action does not take",
        with_step({"action": "core.wait", "params": {"duration": "5m", "until": "dawn"}}),
        [
            "phase 'opening', 2nd step, field 'params.until': unknown field 'until' (the fields here are duration)"
        ],
    ),
    (
        "a wait that is not a duration",
        with_step({"action": "core.wait", "params": {"duration": "soon"}}),
        ["phase 'opening', 2nd step, field 'params.duration': 'soon' is not a duration"],
    ),
    (
        "duplicate phase keys",
        two_phases(second_key="opening"),
        ["phase 'opening', field 'key': phase keys must be unique: 'opening' is used by an earlier phase"],
    ),
    (
        "bad cron",
        two_phases(schedule={"cron": "0 25 * * *", "timezone": "Europe/London"}),
        ["field 'schedule.cron': invalid cron expression '0 25 * * *'"],
    ),
    (
        "unknown time zone",
        two_phases(schedule={"cron": "0 20 * * FRI", "timezone": "Europe/Atlantis"}),
        ["field 'schedule.timezone': unknown time zone 'Europe/Atlantis'"],
    ),
    (
        "negative grace",
        two_phases(grace_seconds=-60),
        ["field 'grace_seconds': grace_seconds must not be negative"],
    ),
    (
        "YAML syntax error",
        "key: broken\ntitle: [unclosed\nphases:\n  - key: opening\n",
        ["line 3, column 7: YAML syntax error"],
    ),
]


def test_every_example_is_valid(cli: Cli) -> None:
    result = cli("validate", *EXAMPLE_FILES)
    assert result.code == 0, result.out
    for example in EXAMPLE_FILES:
        assert f"ok    {example}: " in result.out
    assert f"{len(EXAMPLE_FILES)} valid, 0 invalid" in result.out
    assert len(EXAMPLE_FILES) >= 3


def test_a_directory_stands_for_its_definitions(cli: Cli) -> None:
    result = cli("validate", EXAMPLES)
    assert result.code == 0
    assert f"{len(EXAMPLE_FILES)} valid, 0 invalid" in result.out
    assert "cron '0 20 * * FRI' in Europe/London" in result.out
    assert "scopes aurora, borealis, celestia" in result.out


@pytest.mark.parametrize(("case", "spec", "expected"), BROKEN, ids=[case for case, _, _ in BROKEN])
def test_a_broken_definition_is_reported_at_its_place(
    cli: Cli, tmp_path: Path, case: str, spec: Any, expected: list[str]
) -> None:
    path = write_yaml(tmp_path / "broken.yaml", spec)
    result = cli("validate", path)
    assert result.code == 1, f"{case} was accepted"
    assert f"FAIL  {path}:" in result.out
    problem_lines = [line.strip() for line in result.lines if line.startswith("      ")]
    assert problem_lines and all(line.startswith(str(path)) for line in problem_lines), (
        "every problem names its file"
    )
    for fragment in expected:
        assert fragment in result.out, f"{case}: {fragment!r} not in\n{result.out}"
    assert "0 valid, 1 invalid" in result.out


def test_every_problem_in_a_file_is_listed_at_once(cli: Cli, tmp_path: Path) -> None:
    """An author fixes a definition in one pass: structural problems do not hide params ones."""
    spec = two_phases(grace_seconds=-1, schedule={"cron": "nonsense", "timezone": "Mars/Base"})
    spec["phases"][1]["steps"] = [{"action": "gm.cue", "params": {}}, {"action": "discord.shout"}]
    path = write_yaml(tmp_path / "many.yaml", spec)
    result = cli("validate", path)
    assert result.code == 1
    assert "FAIL  " in result.out and ": 5 problems" in result.out
    for fragment in (
        "field 'grace_seconds'",
        "field 'schedule.cron'",
        "field 'schedule.timezone'",
        "phase 'closing', 1st step, field 'params.instructions': missing: this field is required",
        "phase 'closing', 2nd step, field 'action': unknown action 'discord.shout'",
    ):
        assert fragment in result.out


def test_valid_and_invalid_files_together_exit_1_and_report_both(cli: Cli, tmp_path: Path) -> None:
    bad = write_yaml(tmp_path / "bad.yaml", with_step({"action": "nope.nothing"}))
    result = cli("validate", EXAMPLES / "treasure-hunt.yaml", bad)
    assert result.code == 1
    assert "ok    " in result.out and "treasure-hunt.yaml" in result.out
    assert "1 valid, 1 invalid" in result.out


def test_two_files_with_one_key_are_refused(cli: Cli, tmp_path: Path) -> None:
    """Publishing both would make the second silently replace the first."""
    first = write_yaml(tmp_path / "first.yaml", definition(WAIT, key="same"))
    second = write_yaml(tmp_path / "second.yaml", definition(WAIT, key="same"))
    result = cli("validate", first, second)
    assert result.code == 1
    assert f"{first}, field 'key': key 'same' is also used by {second}" in result.out
    assert f"{second}, field 'key': key 'same' is also used by {first}" in result.out


def test_a_missing_file_is_a_problem_not_a_crash(cli: Cli, tmp_path: Path) -> None:
    result = cli("validate", tmp_path / "nowhere.yaml")
    assert result.code == 1
    assert "nowhere.yaml: cannot read the file" in result.out


def test_an_empty_directory_is_an_error(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = cli("validate", tmp_path / "empty")
    assert result.code == 1
    assert "no *.yaml or *.yml files in this directory" in result.err


def test_defect_a_sign_up_that_no_message_would_ever_show_was_accepted(cli: Cli, tmp_path: Path) -> None:
    """A ``signup:`` with neither ``channel`` nor a ``discord.signup`` step: nobody could ever click."""
    path = write_yaml(tmp_path / "raid.yaml", definition(WAIT, key="raid", signup={"options": ["going"]}))
    result = cli("validate", path)
    assert result.code == 1
    assert "field 'signup': no sign-up message would ever be posted: give signup.channel" in result.out
    assert "or add a discord.signup step" in result.out


def test_defect_a_once_whose_sign_ups_had_already_closed_was_accepted(cli: Cli, tmp_path: Path) -> None:
    """A ``once`` an hour away whose sign-ups close two hours before it: closed before anyone saw it."""
    import datetime as dt

    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).replace(microsecond=0).isoformat()
    signup = {"options": ["going"], "channel": "announcements", "closes": "2h"}
    spec = definition(WAIT, key="raid", signup=signup, schedule={"once": soon})
    result = cli("validate", write_yaml(tmp_path / "raid.yaml", spec))
    assert result.code == 1
    assert "field 'signup.closes': sign-ups would close" in result.out
    assert "which has already passed: nobody could sign up (a shorter closes:, or closes: start or end)" in (
        result.out
    )
    signup["closes"] = "30m"
    assert cli("validate", write_yaml(tmp_path / "raid.yaml", spec)).code == 0


def test_slots_adding_up_past_the_overall_capacity_are_a_warning_not_a_refusal(
    cli: Cli, tmp_path: Path
) -> None:
    signup = {"options": {"tank": 2, "dps": 6}, "capacity": 5, "channel": "announcements"}
    result = cli("validate", write_yaml(tmp_path / "raid.yaml", definition(WAIT, key="raid", signup=signup)))
    assert result.code == 0, result.out
    assert "warning: signup: the options hold 8 seats together and the event 5" in result.out
    signup["capacity"] = 8
    result = cli("validate", write_yaml(tmp_path / "raid.yaml", definition(WAIT, key="raid", signup=signup)))
    assert "warning" not in result.out


def test_defect_validate_with_a_config_refused_every_game_step_and_now_refuses_only_an_unknown_alias(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alias check built its registry without the config's game targets, so every
    ``webhook.post`` and ``rcon.command`` step was refused as naming none (the invasion example
    failed ``validate --config config.example.yaml``). A target alias is checked; its secret is
    the bot machine's business, not the definition's, so an unset variable is not refused here."""
    monkeypatch.delenv("EVENTBOT_GAME_RCON_PASSWORD", raising=False)
    monkeypatch.delenv("EVENTBOT_REWARDS_WEBHOOK_SECRET", raising=False)
    invasion = EXAMPLES / "invasion.yaml"
    result = cli("validate", invasion, "--config", EXAMPLE_CONFIG)
    assert result.code == 0, result.out
    elsewhere = invasion.read_text(encoding="utf-8").replace("server: game", "server: creative")
    result = cli("validate", write_yaml(tmp_path / "invasion.yaml", elsewhere), "--config", EXAMPLE_CONFIG)
    assert result.code == 1
    assert "phase 'battle', 4th step: no RCON server 'creative' in the config's rcon (game)" in result.out
