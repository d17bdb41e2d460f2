"""What an author reads when ``python -m bot validate`` refuses a definition (issue 12,
"Messages people understand"): no raw regex, no pydantic phrase, a "did you mean" for a name
that is nearly right, the schedule's forms, and every field named as the YAML names it.

Each test writes the YAML an author would and runs the command line's own entry point
(``cli.main``, as ``python -m bot validate`` runs it), asserting the exact line printed.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from actions import validation_registry
from cli import main
from runner.definitions import EventDefinition, from_spec, validate
from runner.definitions.words import SCHEDULE_FORMS
from runner.errors import DefinitionError
from runner.suggestions import closest, did_you_mean
from tests.support.definitions import event, phase, wait

CONFIG = """\
channels:
  announcements: 100000000000000101
  gm-cues: 100000000000000104
roles:
  game-masters: 100000000000000203
  quiz-fans: 100000000000000206
gm_channel: gm-cues
"""

KEY_RULE = "use lower case letters, digits, - and _, starting with a letter or a digit, at most 64 characters"
CHANNEL_RULE = (
    "name a channel alias from the config (lower case letters, digits, - and _, starting with a "
    "letter or a digit, at most 100 characters; a leading # is allowed) or a channel id (15 to 21 "
    "digits)"
)
# How every duration message names its units (issue 26 item 5: 'd' was only ever an example).
UNITS = "the units are d, h, m and s (days, hours, minutes, seconds)"
# Pydantic's own voice: none of it may reach an author.
PYDANTIC_PHRASES = (
    "Input should",
    "Extra inputs",
    "Value error",
    "Field required",
    "String should",
    "List should",
    "Unable to extract tag",
    "valid dictionary",
    "discriminator",
    "DiscordEventDefinition",
    "should match pattern",
)
# What an author wrote, quoted back in a message, may say anything.
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def speaks_pydantic(message: str) -> bool:
    """Whether ``message`` has one of pydantic's phrases outside the author's own quoted text."""
    unquoted = QUOTED.sub("", message)
    return any(phrase in unquoted for phrase in PYDANTIC_PHRASES)


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty directory and no EVENTBOT_* variable, so no stray config changes what is read."""
    for name in list(os.environ):
        if name.startswith("EVENTBOT_") or name == "DISCORD_TOKEN":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def validate_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *, config: bool = False
) -> list[str]:
    """``python -m bot validate FILE`` on ``text``: the problem lines it prints, without the
    file's name in front (every one of them must start with it)."""
    path = tmp_path / "event.yaml"
    path.write_text(textwrap.dedent(text))
    argv = ["validate", str(path)]
    if config:
        (tmp_path / "config.yaml").write_text(CONFIG)
        argv = ["--config", str(tmp_path / "config.yaml"), *argv]
    code = main(argv)
    out = capsys.readouterr().out
    problems = [line.strip() for line in out.splitlines() if line.startswith("      ")]
    assert code == 1, out
    assert problems and all(line.startswith(f"{path}, ") for line in problems), out
    return [line.removeprefix(f"{path}, ") for line in problems]


def one_step(step: str) -> str:
    """A definition whose only step is ``step`` (YAML, indented as a step's lines)."""
    indented = textwrap.indent(textwrap.dedent(step).strip(), " " * 6)
    return f"""\
key: raid
title: Raid night
phases:
  - key: main
    label: Main
    steps:
{indented}
"""


# ── no raw regexes ──


def test_an_event_key_says_in_words_what_a_key_is(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step("- action: core.wait\n  params: {duration: 1m}").replace("key: raid", "key: Raid Night!"),
    )
    assert lines == [f"field 'key': 'Raid Night!' is not a key (it has 'R', ' ', 'N', '!'): {KEY_RULE}"]


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("_opening", "it starts with '_'"),
        ("Opening", "it has upper case letters"),
        ("o" * 65, "it is 65 characters"),
    ],
)
def test_a_phase_key_says_which_rule_it_breaks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, why: str
) -> None:
    text = one_step("- action: core.wait\n  params: {duration: 1m}").replace("- key: main", f"- key: {key}")
    [line] = validate_text(capsys, tmp_path, text)
    shown = repr(key if len(key) <= 40 else key[:40] + "…")
    assert line == f"phase {key!r}, field 'key': {shown} is not a key ({why}): {KEY_RULE}"


def test_a_channel_says_it_is_an_alias_or_an_id(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step("- action: discord.announce\n  params: {channel: Town Square, content: hi}"),
    )
    assert lines == [
        f"phase 'main', 1st step, field 'params.channel': 'Town Square' is not a channel: {CHANNEL_RULE}"
    ]


def test_a_cue_channel_is_worded_as_an_announcement_channel_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys, tmp_path, one_step("- action: gm.cue\n  params: {instructions: go, channel: '#GM Cues'}")
    )
    assert lines == [
        f"phase 'main', 1st step, field 'params.channel': '#GM Cues' is not a channel: {CHANNEL_RULE}"
    ]


def test_a_colour_says_how_to_write_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    step = """\
    - action: discord.announce
      params:
        channel: announcements
        embed: {title: Tonight, colour: purple, image: "http://example.org/a.png"}
    """
    lines = validate_text(capsys, tmp_path, one_step(step))
    assert lines == [
        "phase 'main', 1st step, field 'params.embed.colour': colour 'purple' is not a colour: write it "
        'as "#RRGGBB", six hexadecimal digits (0-9 and A-F, e.g. "#6A3FB5"), or as a number from 0 '
        "to 16777215",
        "phase 'main', 1st step, field 'params.embed.image': 'http://example.org/a.png' is not an image "
        "address: write its https:// link, with no spaces",
    ]


def test_no_model_an_author_writes_keeps_a_raw_pattern() -> None:
    """Every ``pattern=`` constraint in the definition models and in every action's params model
    would reach an author as the regex itself; each is a validator that says it in words instead.
    This walks every model reachable from a definition and each params model and fails on any
    field still constrained by a bare pattern."""
    seen: set[type[BaseModel]] = set()
    raw_patterns: list[str] = []

    def models_in(annotation: Any) -> Iterator[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield annotation
        for arg in get_args(annotation):
            yield from models_in(arg)

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            for constraint in field.metadata:
                if getattr(constraint, "pattern", None) is not None:
                    raw_patterns.append(f"{model.__name__}.{name}")
            for inner in models_in(field.annotation):
                visit(inner)

    visit(EventDefinition)
    registry = validation_registry()
    for action_id in registry.ids():
        action = registry.get(action_id)
        assert action is not None
        visit(action.params_model)
    assert {m.__name__ for m in seen} >= {"EventDefinition", "OnceSchedule", "AnnounceParams", "CueParams"}
    assert raw_patterns == []


# ── did you mean ──


def test_color_is_an_unknown_field_that_suggests_colour(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    step = """\
    - action: discord.announce
      params:
        channel: announcements
        embed: {title: Tonight, color: "#6A3FB5"}
    """
    lines = validate_text(capsys, tmp_path, one_step(step))
    assert lines == [
        "phase 'main', 1st step, field 'params.embed.color': unknown field 'color'; did you mean 'colour'?"
    ]


def test_an_unknown_field_with_no_near_name_lists_the_fields_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys, tmp_path, one_step("- action: core.wait\n  params: {duration: 1m, until: dawn}")
    )
    assert lines == [
        "phase 'main', 1st step, field 'params.until': unknown field 'until' (the fields here are duration)"
    ]


def test_an_unknown_step_field_suggests_the_right_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys, tmp_path, one_step("- action: core.wait\n  lable: Breathe\n  params: {duration: 1m}")
    )
    assert lines == ["phase 'main', 1st step, field 'lable': unknown field 'lable'; did you mean 'label'?"]


def test_an_unknown_action_suggests_the_near_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step("- action: discord.anounce\n  params: {channel: announcements, content: hi}"),
    )
    assert lines == [
        "phase 'main', 1st step, field 'action': unknown action 'discord.anounce'; did you mean "
        "'discord.announce'? (known: core.wait (Wait), discord.announce (Announce in a channel), "
        "discord.dm_attendees (A reminder's DM to each attendee), discord.signup (Post the sign-up message), discord.thread (Start a thread on the announcement), gm.cue (Cue a game master), "
        "rcon.command (Send an RCON command), webhook.post (Post to a webhook))"
    ]


def test_an_unknown_channel_alias_suggests_the_configured_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step("- action: discord.announce\n  params: {channel: anouncements, content: hi}"),
        config=True,
    )
    assert lines == [
        "phase 'main', 1st step, field 'params.channel': channel 'anouncements' is not one of the channel aliases in config "
        "(channels: announcements, gm-cues); did you mean 'announcements'?"
    ]


def test_an_unknown_role_alias_suggests_the_configured_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step("- action: gm.cue\n  params: {instructions: go, ping_role: game-master}"),
        config=True,
    )
    assert lines == [
        "phase 'main', 1st step, field 'params.ping_role': ping role 'game-master' is not one of the role aliases in config "
        "(roles: game-masters, quiz-fans); did you mean 'game-masters'?"
    ]


def test_an_alias_with_nothing_near_it_gets_no_suggestion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step("- action: discord.announce\n  params: {channel: lobby, content: hi}"),
        config=True,
    )
    assert lines == [
        "phase 'main', 1st step, field 'params.channel': channel 'lobby' is not one of the channel aliases in config "
        "(channels: announcements, gm-cues)"
    ]


def test_an_unknown_placeholder_suggests_the_known_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = validate_text(
        capsys,
        tmp_path,
        one_step('- action: discord.announce\n  params: {channel: announcements, content: "Raid in {scop}"}'),
    )
    assert lines == [
        "phase 'main', 1st step, field 'params.content': unknown placeholder {scop} (did you mean "
        "{scope}?). The placeholders are {scope}, {title}, {start}, {start_relative}, {attendees}, "
        "{attendee_count}; write {{ and }} "
        "for a literal { or }"
    ]


def test_one_helper_decides_what_is_near() -> None:
    """Fields, actions, aliases and placeholders all ask ``runner.suggestions``: letter case
    alone is a match, a typo is, an unrelated name is not."""
    assert closest("Colour", ["colour", "title"]) == "colour"
    assert closest("color", ["colour", "title"]) == "colour"
    assert closest("size", ["colour", "title"]) is None
    assert did_you_mean("color", ["colour"]) == "; did you mean 'colour'?"
    assert did_you_mean("colour", ["colour"]) == ""


# ── the schedule ──


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ("weekly", "'weekly' is not a schedule."),
        ("Manual", "'Manual' is not a schedule; did you mean 'manual'?"),
        ("{every: friday}", "a schedule mapping needs cron or once (this one has 'every')."),
        (
            "{crn: '0 20 * * FRI', timezone: Europe/Berlin}",
            "a schedule mapping needs cron or once (this one has 'crn', 'timezone'; did you mean 'cron'?).",
        ),
        ("{kind: weekly}", "kind 'weekly' is not a kind of schedule (manual, once or cron)."),
        ("{}", "an empty mapping is not a schedule."),
        ("5", "a number (5) is not a schedule."),
    ],
)
def test_a_bad_schedule_form_says_which_forms_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, schedule: str, said: str
) -> None:
    text = one_step("- action: core.wait\n  params: {duration: 1m}").replace(
        "title: Raid night", f"title: Raid night\nschedule: {schedule}"
    )
    assert validate_text(capsys, tmp_path, text) == [f"field 'schedule': {said} {SCHEDULE_FORMS}"]
    assert SCHEDULE_FORMS == (
        'A schedule is one of: schedule: manual (staff start it); schedule: {cron: "0 20 * * FRI", '
        "timezone: Europe/Berlin} (repeats, read in that time zone); schedule: {once: "
        '"2026-12-24T20:00:00+01:00"} (one date and time, with its UTC offset)'
    )


def test_every_schedule_form_the_message_shows_is_one_that_validates() -> None:
    """The examples in the forms message are real: each, as written there, validates."""
    for schedule in (
        "manual",
        {"cron": "0 20 * * FRI", "timezone": "Europe/Berlin"},
        {"once": "2099-12-24T20:00:00+01:00"},
    ):
        validate(event(schedule=schedule), validation_registry())


def test_defect_once_without_offset_is_located_at_schedule_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: a ``once`` time with no UTC offset was reported at ``schedule.at``, the model's
    internal name, which appears nowhere in the author's file. Now it is ``schedule.once``, the
    name the author wrote."""
    text = one_step("- action: core.wait\n  params: {duration: 1m}").replace(
        "title: Raid night", 'title: Raid night\nschedule: {once: "2099-12-24T20:00:00"}'
    )
    assert validate_text(capsys, tmp_path, text) == [
        "field 'schedule.once': needs a time zone offset, e.g. 2026-12-05T19:00:00+01:00"
    ]


def test_the_explicit_once_form_is_located_at_the_at_it_writes() -> None:
    """``{kind: once, at: ...}`` (the explicit form) names the field ``at``, as written there."""
    with pytest.raises(DefinitionError) as refused:
        validate(event(schedule={"kind": "once", "at": "2099-12-24T20:00:00"}), validation_registry())
    assert [p.field for p in refused.value.problems] == ["schedule.at"]


def test_defect_a_once_already_over_is_located_at_schedule_once() -> None:
    """Before: the past-``once`` refusal also named ``schedule.at``. Now ``schedule.once``."""
    with pytest.raises(DefinitionError) as refused:
        validate(event(schedule={"once": "2020-01-01T10:00:00+00:00"}), validation_registry())
    assert [p.field for p in refused.value.problems] == ["schedule.once"]


def test_a_once_that_is_not_a_date_says_how_to_write_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = one_step("- action: core.wait\n  params: {duration: 1m}").replace(
        "title: Raid night", "title: Raid night\nschedule: {once: soon}"
    )
    assert validate_text(capsys, tmp_path, text) == [
        "field 'schedule.once': 'soon' is not a date and time: write it like 2026-12-24T20:00:00+01:00"
    ]


def test_once_and_cron_together_say_a_schedule_is_one_of_them() -> None:
    with pytest.raises(DefinitionError) as refused:
        validate(
            event(schedule={"once": "2099-01-01T10:00:00Z", "cron": "0 20 * * FRI"}), validation_registry()
        )
    [problem] = refused.value.problems
    assert str(problem) == (
        "field 'schedule.cron': a schedule is cron or once, not both: cron is for a repeating "
        "schedule, and a once time carries its own UTC offset"
    )


def test_a_cron_without_its_time_zone_is_missing_it() -> None:
    with pytest.raises(DefinitionError) as refused:
        validate(event(schedule={"cron": "0 20 * * FRI"}), validation_registry())
    assert [str(p) for p in refused.value.problems] == [
        "field 'schedule.timezone': missing: this field is required"
    ]


# ── grace_seconds takes a duration ──


def test_grace_seconds_takes_duration_text_as_a_wait_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    registry = validation_registry()
    assert validate(event(grace_seconds="10m"), registry).grace_seconds == 600
    assert validate(event(grace_seconds="90s"), registry).grace_seconds == 90
    assert validate(event(grace_seconds="1h"), registry).grace_seconds == 3600
    assert validate(event(grace_seconds=0), registry).grace_seconds == 0
    assert validate(event(grace_seconds=900), registry).grace_seconds == 900
    text = one_step("- action: core.wait\n  params: {duration: 1m}").replace(
        "title: Raid night", "title: Raid night\ngrace_seconds: 10m"
    )
    path = tmp_path / "event.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 0, capsys.readouterr().out


def test_grace_seconds_as_text_is_stored_as_the_number_it_always_was() -> None:
    """The stored JSON is unchanged: ``10m`` is stored as 600, as ``600`` always was, so both
    publish as one version, and a version stored as a number before loads as it did."""
    registry = validation_registry()
    as_text = validate(event(grace_seconds="10m"), registry)
    as_number = validate(event(grace_seconds=600), registry)
    assert json.loads(as_text.canonical_json())["grace_seconds"] == 600
    assert as_text.content_hash() == as_number.content_hash()
    assert from_spec(json.loads(as_number.canonical_json())).grace_seconds == 600


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            "soon",
            "'soon' is not a duration: grace_seconds is a number of seconds or text like '10m', '90s' or '1h': "
            + UNITS,
        ),
        (
            "-5m",
            "'-5m' is not a duration: grace_seconds is a number of seconds or text like '10m', '90s' or '1h': "
            + UNITS,
        ),
        (-1, "grace_seconds must not be negative (0 means: start on time or not at all)"),
        ("8d", "grace_seconds may be at most 7 days"),
        ("1.5s", "grace_seconds is whole seconds (no fractions)"),
        (True, "grace_seconds is a number of seconds or text like '10m', '90s' or '1h': " + UNITS),
    ],
)
def test_grace_seconds_that_is_no_duration_is_refused_in_words(value: Any, said: str) -> None:
    with pytest.raises(DefinitionError) as refused:
        validate(event(grace_seconds=value), validation_registry())
    assert [str(p) for p in refused.value.problems] == [f"field 'grace_seconds': {said}"]


# ── pydantic's phrases, worded ──


def test_a_missing_required_field_says_missing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = validate_text(capsys, tmp_path, one_step("- action: gm.cue\n  params: {title: Warlord}"))
    assert lines == ["phase 'main', 1st step, field 'params.instructions': missing: this field is required"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("label: 5", "phase 'main', field 'label': must be text, not a number (5)"),
        ("label: [a, b]", "phase 'main', field 'label': must be text, not a list"),
        ("steps: go", "phase 'main', field 'steps': must be a list, not the text 'go'"),
    ],
)
def test_a_wrong_type_says_what_it_must_be_and_what_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str, said: str
) -> None:
    text = one_step("- action: core.wait\n  params: {duration: 1m}")
    field = line.split(":")[0]
    if field == "label":
        text = text.replace("label: Main", line)
    else:
        text = text.split("    steps:")[0] + f"    {line}\n"
    assert validate_text(capsys, tmp_path, text) == [said]


def test_a_choice_lists_the_choices(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = validate_text(
        capsys, tmp_path, one_step("- action: core.wait\n  on_failure: retry\n  params: {duration: 1m}")
    )
    assert lines == [
        "phase 'main', 1st step, field 'on_failure': 'retry' is not one of skip, pause, abort_run"
    ]


def test_discord_event_that_is_neither_a_flag_nor_a_mapping_gets_one_message() -> None:
    """Before: pydantic reported the union member by member (``discord_event.bool``,
    ``discord_event.DiscordEventDefinition``). Now one message names the forms."""
    with pytest.raises(DefinitionError) as refused:
        validate(event(discord_event=5, duration="1h"), validation_registry())
    assert [str(p) for p in refused.value.problems] == [
        "field 'discord_event': must be true, false, or a mapping (with location, description), not a number (5)"
    ]
    with pytest.raises(DefinitionError) as refused:
        validate(event(discord_event={"locaton": "Town"}, duration="1h"), validation_registry())
    assert [str(p) for p in refused.value.problems] == [
        "field 'discord_event.locaton': unknown field 'locaton'; did you mean 'location'?"
    ]


def test_defect_discord_event_without_duration_is_located_at_discord_event() -> None:
    """Before: a mirrored event with no ``duration`` was refused by a model-wide check, so the
    problem had no field. Now it names ``discord_event``; reminders on a manual event name
    ``reminders``."""
    with pytest.raises(DefinitionError) as refused:
        validate(event(discord_event=True), validation_registry())
    assert [p.field for p in refused.value.problems] == ["discord_event"]
    reminder = {"before": "1h", "channel": "announcements", "content": "soon"}
    with pytest.raises(DefinitionError) as refused:
        validate(event(reminders=[reminder]), validation_registry())
    assert [p.field for p in refused.value.problems] == ["reminders"]


def test_a_reminder_field_is_named_as_written_flat() -> None:
    """A reminder's announcement fields sit beside ``before``: a problem is at
    ``reminders.0.channel``, never ``reminders.0.params.channel``, and a typo of ``before``
    is suggested like any field."""
    reminder = {"befor": "1h", "chanel": "announcements", "content": "soon"}
    with pytest.raises(DefinitionError) as refused:
        validate(
            event(reminders=[reminder], schedule={"cron": "0 20 * * FRI", "timezone": "UTC"}),
            validation_registry(),
        )
    assert [str(p) for p in refused.value.problems] == [
        "field 'reminders.0.before': missing: this field is required",
        "field 'reminders.0.channel': missing: this field is required",
        "field 'reminders.0.befor': unknown field 'befor'; did you mean 'before'?",
        "field 'reminders.0.chanel': unknown field 'chanel'; did you mean 'channel'?",
    ]


BAD_INPUTS: list[dict[str, Any]] = [
    event(description=None),
    event(title=5, description=["a"], scopes="x", concurrency_key=5),
    event(schedule="fortnightly"),
    event(schedule={"kind": "cron"}),
    event(schedule={"once": "2099-01-01"}),
    event(discord_event="sometimes", duration="1h"),
    event(discord_event=[1], duration="1h"),
    event(grace_seconds=None),
    event(reminders="soon", schedule={"cron": "0 20 * * FRI", "timezone": "UTC"}),
    event(reminders=[{"before": [1], "channel": 5}], schedule={"cron": "0 20 * * FRI", "timezone": "UTC"}),
    event(phases="main"),
    event(phases=[{"key": 5, "label": None, "steps": [5]}]),
    event(phases=[{"key": "main", "label": "M", "steps": [{"action": 5, "params": []}]}]),
    event(
        "raid",
        {
            "key": "main",
            "label": "M",
            "steps": [
                {
                    "action": "discord.announce",
                    "params": {
                        "channel": 5,
                        "content": "",
                        "ping_role": 7,
                        "embed": {"title": 5, "colour": [1], "fields": "x", "image": 3},
                    },
                },
                {"action": "gm.cue", "params": {"instructions": "x" * 5000, "title": ["t"]}},
                {"action": "core.wait", "params": {"duration": None}},
                {"action": "discord.announce", "params": {"channel": "a", "embed": {"fields": [{}] * 30}}},
            ],
        },
    ),
]


@pytest.mark.parametrize("raw", BAD_INPUTS, ids=range(len(BAD_INPUTS)))
def test_no_pydantic_phrase_reaches_an_author(raw: dict[str, Any]) -> None:
    """Whatever is wrong, every problem is in the project's words: none of pydantic's phrases
    ("Input should be ...", "Field required", union tags, a pattern)."""
    with pytest.raises(DefinitionError) as refused:
        validate(raw, validation_registry())
    for problem in refused.value.problems:
        assert not speaks_pydantic(str(problem)), str(problem)
        assert not any(phrase in str(problem) for phrase in PYDANTIC_PHRASES), str(problem)


def test_defect_a_problem_names_its_step_by_place_not_as_step_0() -> None:
    """Before, a problem was located at "phase 'main', step 0": the 0-based place in the file,
    read as the step numbered 0 by anyone who knows that steps are named by id everywhere else
    ("step 5 (Open the gates)"). Now the place is an ordinal, counted from one."""
    from runner.errors import Problem

    assert str(Problem("bad", phase="main", step=0, field="action")) == (
        "phase 'main', 1st step, field 'action': bad"
    )
    assert Problem("bad", phase="main", step=10).where() == "phase 'main', 11th step"
    assert Problem("bad", phase="main", step=21).where() == "phase 'main', 22nd step"


@pytest.mark.parametrize(
    "fields",
    [
        {"phases": [phase("main", wait("2 days"))]},
        {"phases": [phase("main", wait(True))]},
        {"duration": "1w"},
        {"grace_seconds": "1w"},
        {"grace_seconds": True},
        {"duration": [1]},
        {"schedule": {"cron": "0 20 * * FRI", "timezone": "UTC"}, "reminders": [{"before": "1w"}]},
        {"signup": {"options": ["going"], "closes": "1w"}},
    ],
    ids=["wait", "wait-bool", "duration", "grace", "grace-bool", "duration-list", "reminder", "closes"],
)
def test_defect_every_duration_message_names_the_d_unit(fields: dict[str, Any]) -> None:
    """Before: a new user who wrote '2 days' or '1w' was shown '90s', '5m', '1h30m' and at most
    '2d' as examples, never that d (days) is a unit, and the lead-time and grace messages did not
    show it at all. Now every duration message names the four units."""
    with pytest.raises(DefinitionError) as refused:
        validate(event(**fields), validation_registry())
    [problem] = [str(p) for p in refused.value.problems if "duration" in str(p) or "seconds" in str(p)]
    assert UNITS in problem, problem
