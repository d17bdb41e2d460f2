"""``wiring.config``: validated once, every problem listed, the environment overriding the file,
and the token only ever from DISCORD_TOKEN. The CLI's handling of a bad config is at the end.

(These live under tests/cli rather than tests/bot, which belongs to the Discord front end.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.db import DEFAULT_URL
from tests.cli.conftest import EXAMPLE_CONFIG, Cli, write_yaml
from wiring.config import CAPABILITIES, Config, ConfigError, load, token_from_env

GOOD = {
    "guild_id": 100000000000000001,
    "channels": {"announcements": 100000000000000101, "gm-cues": 100000000000000104},
    "roles": {"staff": 100000000000000201, "pings": 100000000000000202},
    "permissions": {"start": ["staff"], "cue": ["staff"]},
    "gm_channel": "gm-cues",
    "announce": {"allowed_ping_roles": ["pings"]},
}


def problems_of(path: Path, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(path, environ or {})
    return caught.value.problems


def test_no_file_gives_the_documented_defaults() -> None:
    config = load(None, {})
    assert config.database_url == DEFAULT_URL
    assert config.guild_id is None and config.channels == {} and config.roles == {}
    assert config.tick_interval_seconds == 5.0
    assert config.definitions_dir == "events"
    assert config.rehearsal_speed == 60.0
    assert config.announce.allow_everyone is False


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load(write_yaml(tmp_path / "c.yaml", ""), {}) == Config()


def test_the_example_config_is_valid_and_sets_every_key() -> None:
    config = load(EXAMPLE_CONFIG, {})
    for key in Config.model_fields:
        assert key in EXAMPLE_CONFIG.read_text(), f"config.example.yaml does not document {key}"
    assert set(config.permissions) == set(CAPABILITIES)
    assert config.gm_channel in config.channels and config.sandbox_channel in config.channels


def test_the_example_config_documents_the_token_and_the_overrides() -> None:
    text = EXAMPLE_CONFIG.read_text()
    assert "DISCORD_TOKEN" in text
    for variable in (
        "EVENTBOT_DATABASE_URL",
        "EVENTBOT_GUILD_ID",
        "EVENTBOT_TICK_INTERVAL_SECONDS",
        "EVENTBOT_DEFINITIONS_DIR",
        "EVENTBOT_REHEARSAL_SPEED",
    ):
        assert variable in text
    assert "mysql+asyncmy://" in text


@pytest.mark.parametrize(
    ("variable", "value", "key", "expected"),
    [
        (
            "EVENTBOT_DATABASE_URL",
            "sqlite+aiosqlite:///other.sqlite3",
            "database_url",
            "sqlite+aiosqlite:///other.sqlite3",
        ),
        ("EVENTBOT_GUILD_ID", "300000000000000003", "guild_id", 300000000000000003),
        ("EVENTBOT_TICK_INTERVAL_SECONDS", "1.5", "tick_interval_seconds", 1.5),
        ("EVENTBOT_DEFINITIONS_DIR", "/srv/events", "definitions_dir", "/srv/events"),
        ("EVENTBOT_REHEARSAL_SPEED", "120", "rehearsal_speed", 120.0),
    ],
)
def test_environment_variables_override_the_file(
    tmp_path: Path, variable: str, value: str, key: str, expected: object
) -> None:
    path = write_yaml(tmp_path / "c.yaml", GOOD)
    assert getattr(load(path, {variable: value}), key) == expected


def test_an_empty_environment_variable_does_not_override(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "c.yaml", {**GOOD, "definitions_dir": "mine"})
    assert load(path, {"EVENTBOT_DEFINITIONS_DIR": ""}).definitions_dir == "mine"


def test_a_bad_environment_value_is_named(tmp_path: Path) -> None:
    problems = problems_of(write_yaml(tmp_path / "c.yaml", GOOD), {"EVENTBOT_GUILD_ID": "my-server"})
    assert any(p.startswith("guild_id (from EVENTBOT_GUILD_ID): ") for p in problems), problems


def test_every_field_problem_is_listed_each_naming_its_key(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "c.yaml",
        {**GOOD, "tick_interval_seconds": 0, "rehearsal_speed": "fast", "colour": "blue", "guild_id": "home"},
    )
    problems = problems_of(path)
    for text in (
        "tick_interval_seconds: must be a number of seconds from 0.5 to 300",
        "colour: unknown key",
    ):
        assert text in problems, problems
    assert any(p.startswith("rehearsal_speed: ") for p in problems)
    assert any(p.startswith("guild_id: ") for p in problems)
    assert len(problems) == 4


def test_every_reference_problem_is_listed_each_naming_its_key(tmp_path: Path) -> None:
    """Aliases that point nowhere. (These are checked once every field parses, so a config with
    a field problem too shows those first.)"""
    path = write_yaml(
        tmp_path / "c.yaml",
        {
            **GOOD,
            "gm_channel": "gm",
            "sandbox_channel": "play",
            "permissions": {"start": ["admins"], "launch": []},
            "announce": {"allowed_ping_roles": ["everyone-ish"]},
        },
    )
    problems = problems_of(path)
    assert problems == [
        "gm_channel: 'gm' is not one of the channel aliases in 'channels'",
        "sandbox_channel: 'play' is not one of the channel aliases in 'channels'",
        "permissions.start: 'admins' is not one of the role aliases in 'roles'",
        "permissions.launch: unknown capability (use start, control, cue, rehearse, publish, signups, approve)",
        "announce.allowed_ping_roles: 'everyone-ish' is not one of the role aliases in 'roles'",
    ]
    assert problems_of(write_yaml(tmp_path / "z.yaml", {"channels": {"zero": 0}})) == [
        "channels.zero: must be a Discord id: a positive number below 2**64"
    ]


def test_a_token_in_the_file_is_refused_alongside_other_problems(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "c.yaml", {"discord_token": "abc", "tick_interval_seconds": 900})
    problems = problems_of(path)
    assert problems[0].startswith("token: never put the bot token in a file")
    assert any(p.startswith("tick_interval_seconds: ") for p in problems)
    assert "abc" not in " ".join(problems)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("guild_id: [1, 2\n", "line 2, column 1: YAML syntax error: "),
        ("- just\n- a list\n", "the config file must be a mapping of keys"),
    ],
)
def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    problems = problems_of(write_yaml(tmp_path / "c.yaml", text))
    assert any(expected in p for p in problems), problems


def test_a_missing_file_is_refused_and_the_error_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path / "nope.yaml", {})
    assert caught.value.problems[0].startswith("cannot read the config file")
    assert str(caught.value).startswith(f"{tmp_path / 'nope.yaml'}: ")


def test_rehearsal_speed_must_not_slow_waits_down(tmp_path: Path) -> None:
    problems = problems_of(write_yaml(tmp_path / "c.yaml", {"rehearsal_speed": 0.5}))
    assert any(p.startswith("rehearsal_speed: ") for p in problems)


def test_the_token_comes_from_the_environment_trimmed() -> None:
    assert token_from_env({"DISCORD_TOKEN": "  abc.def  \n"}) == "abc.def"
    assert token_from_env({"DISCORD_TOKEN": "   "}) is None
    assert token_from_env({}) is None


def test_aliases_and_raw_ids_resolve(tmp_path: Path) -> None:
    config = load(write_yaml(tmp_path / "c.yaml", GOOD), {})
    assert config.channel_id("announcements") == 100000000000000101
    assert config.channel_id("#announcements") == 100000000000000101
    assert config.channel_id("123456789012345678") == 123456789012345678
    assert config.channel_id("nowhere") is None
    assert config.role_id("pings") == 100000000000000202
    assert config.role_id("nobody") is None
    assert config.roles_for("start") == {100000000000000201}
    assert config.roles_for("control") == set()


# ── the CLI's side ─────────────────────────────────────────────────────────


def test_the_cli_refuses_a_bad_config_listing_every_problem(cli: Cli, tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "bad.yaml", {"tick_interval_seconds": -1, "colour": "blue", "token": "x"})
    result = cli("runs", "--config", path)
    assert result.code == 2
    lines = result.err.splitlines()
    assert lines[0] == f"the configuration is not valid ({path}):"
    assert any("token: never put the bot token in a file" in line for line in lines)
    assert any("tick_interval_seconds: " in line for line in lines)
    assert any("colour: unknown key" in line for line in lines)
    assert len(lines) == 4
    assert result.out == ""


def test_config_may_be_given_before_or_after_the_command(cli: Cli, tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "bad.yaml", {"colour": "blue"})
    assert cli("--config", path, "migrate").code == 2
    assert cli("migrate", "--config", path).code == 2


def test_a_bad_environment_variable_is_refused_by_the_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTBOT_TICK_INTERVAL_SECONDS", "often")
    result = cli("migrate")
    assert result.code == 2
    assert "tick_interval_seconds (from EVENTBOT_TICK_INTERVAL_SECONDS): " in result.err


def test_discord_events_defaults_and_bounds(tmp_path: Path) -> None:
    """The mirror is off unless asked for, lists a week ahead, and never more than 90 at once
    (Discord's limit is 100 scheduled or active events per server)."""
    events = Config().discord_events
    assert (events.mirror, events.horizon, events.max_listed) == (False, 7 * 86400.0, 50)
    assert Config.model_validate({"discord_events": {"horizon": "36h"}}).discord_events.horizon == 36 * 3600.0
    for bad, where in [
        ({"max_listed": 91}, "discord_events.max_listed"),
        ({"max_listed": 0}, "discord_events.max_listed"),
        ({"horizon": "91d"}, "discord_events.horizon"),
        ({"horizon": "soon"}, "discord_events.horizon"),
        ({"horizon": 0}, "discord_events.horizon"),
        ({"surprise": 1}, "discord_events.surprise"),
    ]:
        problems = problems_of(write_yaml(tmp_path / "config.yaml", {"discord_events": bad}))
        assert any(p.startswith(where) for p in problems), problems


def test_retention_defaults_to_30_days_is_switched_off_by_0_or_null_and_refuses_nonsense(
    tmp_path: Path,
) -> None:
    """Retention is on by default (30 days, 500 rows a statement); 0 and null keep everything;
    a negative, non-numeric or huge period and a batch out of bounds are refused by name."""
    retention = Config().retention
    assert (retention.keep_run_log_days, retention.batch) == (30.0, 500)
    assert retention.keep_seconds == 30 * 86400.0
    for off in (0, None, "0"):
        assert Config.model_validate({"retention": {"keep_run_log_days": off}}).retention.keep_seconds == 0
    assert Config.model_validate({"retention": {"keep_run_log_days": 0.5}}).retention.keep_seconds == 43200
    for bad, where in [
        ({"keep_run_log_days": -1}, "retention.keep_run_log_days: must be a number of days"),
        ({"keep_run_log_days": "a month"}, "retention.keep_run_log_days: must be a number of days"),
        ({"keep_run_log_days": 3651}, "retention.keep_run_log_days: must be a number of days"),
        ({"keep_run_log_days": True}, "retention.keep_run_log_days: must be a number of days"),
        ({"batch": 5}, "retention.batch"),
        ({"batch": 5001}, "retention.batch"),
        ({"keep_days": 30}, "retention.keep_days: unknown key"),
    ]:
        problems = problems_of(write_yaml(tmp_path / "config.yaml", {"retention": bad}))
        assert any(p.startswith(where) for p in problems), problems


@pytest.mark.parametrize("section", ["retention", "discord_events", "announce"])
def test_a_section_that_is_not_a_mapping_says_so_in_words(tmp_path: Path, section: str) -> None:
    """Found by the config fuzz: ``retention: 5`` was refused with pydantic's "Input should be a
    valid dictionary or instance of RetentionSettings", a class name no one wrote."""
    problems = problems_of(write_yaml(tmp_path / "c.yaml", {section: 5}))
    assert problems == [f"{section}: must be a mapping of keys, each on its own line indented under it"]


def test_defect_an_unknown_key_with_a_colon_in_it_read_as_two_fields(tmp_path: Path) -> None:
    """Found by the config fuzz: a key written with ": " inside it (a quoted YAML key) was shown
    as it was, so its problem read as two fields; it is quoted now."""
    path = tmp_path / "config.yaml"
    path.write_text('"news: gm": 1\n', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load(path, environ={})
    assert any(p.startswith("'news: gm': unknown key") for p in refused.value.problems), (
        refused.value.problems
    )


def test_approvals_default_to_destructive_in_the_staff_log_and_refuse_an_unknown_threshold_or_channel(
    tmp_path: Path,
) -> None:
    """Risk decides (issue 29 item 4): ``approve_from`` is destructive unless set, the card goes
    to ``approval_channel``, else the staff log, else the GM channel; a threshold or a channel
    the bot does not know is refused naming its key."""
    config = load(write_yaml(tmp_path / "a.yaml", GOOD), {})
    assert config.approve_from == "destructive" and config.approvals_channel == "gm-cues"
    with_log = load(write_yaml(tmp_path / "b.yaml", {**GOOD, "staff_log_channel": "announcements"}), {})
    assert with_log.approvals_channel == "announcements"
    chosen = {**GOOD, "approval_channel": "gm-cues", "staff_log_channel": "announcements"}
    assert load(write_yaml(tmp_path / "c.yaml", chosen), {}).approvals_channel == "gm-cues"
    bad = {**GOOD, "approve_from": "sometimes", "approval_channel": "vault"}
    problems = problems_of(write_yaml(tmp_path / "d.yaml", bad))
    assert any(p.startswith("approve_from: ") for p in problems), problems
    assert problems_of(write_yaml(tmp_path / "e.yaml", {**GOOD, "approval_channel": "vault"})) == [
        "approval_channel: 'vault' is not one of the channel aliases in 'channels'"
    ]
