"""``wiring.event_templates`` and ``wiring.event_edits``: the templates ``/event create`` fills in,
the YAML ``/event export`` writes, and the fields ``/event edit`` changes (issue 28, item 1)."""

from __future__ import annotations

import datetime as dt
import glob
from pathlib import Path

import pytest
import yaml

from actions import validation_registry
from runner import definitions
from runner.definitions import EventDefinition, load_file
from wiring.config import load
from wiring.definition_checks import check_aliases, check_parsed
from wiring.event_edits import EditError, definition_data, edited, fields_of
from wiring.event_templates import (
    BUNDLED,
    TemplateError,
    as_yaml,
    fill,
    key_from_title,
    list_templates,
    load_template,
    read_template,
)

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 12, 5, 11, 0)
AT = "2026-12-12T20:00:00+01:00"
VALUES = {"title": "Harbour Night", "when": AT, "channel": "announcements", "capacity": 8, "key": "harbour"}


def test_the_four_templates_the_issue_asks_for_are_bundled_in_the_package() -> None:
    assert {t.name for t in list_templates(None)} >= {"announcement", "quiz-night", "raid", "live-event"}
    assert BUNDLED.parent.name == "wiring", "shipped inside a package (pyproject's package-data)"


@pytest.mark.parametrize("name", sorted(p.stem for p in BUNDLED.glob("*.yaml")))
async def test_every_bundled_template_filled_in_validates_against_the_example_config(name: str) -> None:
    template = load_template(name, None)
    text = as_yaml(fill(template, VALUES))
    item = check_parsed(f"{name}.yaml", yaml.safe_load(text), validation_registry(), now=NOW)
    await check_aliases([item], load(REPO / "config.example.yaml"))
    assert item.problems == []
    assert item.definition is not None and item.definition.title == "Harbour Night"
    assert item.definition.schedule.at.isoformat() == AT  # type: ignore[union-attr]


def test_what_staff_type_is_only_ever_a_value_never_yaml() -> None:
    # A title that, pasted into YAML text, would end the string and add a field of its own.
    title = 'x"\nphases: []\nsignup: {options: [a]}\n#'
    data = fill(load_template("announcement", None), {**VALUES, "title": title})
    assert data["title"] == title
    assert yaml.safe_load(as_yaml(data)) == data
    assert "signup" not in data and len(data["phases"]) == 1


def test_an_optional_field_left_empty_is_left_out_of_the_definition() -> None:
    data = fill(load_template("raid", None), {**VALUES, "capacity": None})
    assert "capacity" not in data["signup"]
    assert fill(load_template("raid", None), VALUES)["signup"]["capacity"] == 8


def test_an_operators_folder_adds_templates_and_replaces_a_bundled_one_by_name(tmp_path: Path) -> None:
    (tmp_path / "raid.yaml").write_text(
        "template: {description: Our own raid}\nkey: ${key}\ntitle: ${title}\n"
        "phases: [{key: go, label: Go, steps: [{action: gm.cue, params: {instructions: Go}}]}]\n",
        encoding="utf-8",
    )
    (tmp_path / "market.yaml").write_text((BUNDLED / "announcement.yaml").read_text(), encoding="utf-8")
    found = {t.name: t for t in list_templates(str(tmp_path))}
    assert found["raid"].description == "Our own raid"
    assert found["raid"].fields == ("title", "key"), "no when, channel or capacity to ask"
    assert "market" in found and "announcement" in found


def test_a_template_naming_a_field_the_form_does_not_have_is_refused() -> None:
    with pytest.raises(TemplateError, match=r"uses \$\{colour\}"):
        read_template("odd", b"key: ${key}\ntitle: ${colour}\nphases: []\n")
    with pytest.raises(TemplateError, match="There is no template 'nope'; the templates are: announcement"):
        load_template("nope", None)


def test_a_key_is_made_from_the_title_when_none_is_given() -> None:
    assert key_from_title("Raid Night #3: The Return!", "raid") == "raid-night-3-the-return"
    assert key_from_title("🎉🎉", "raid") == "raid"


@pytest.mark.parametrize("path", sorted(glob.glob(str(REPO / "examples" / "*.yaml"))))
def test_export_writes_yaml_that_reads_back_as_the_same_definition(path: str) -> None:
    definition = load_file(path, validation_registry())
    text = as_yaml(definition_data(definition))
    again = definitions.validate(yaml.safe_load(text), validation_registry())
    assert again.content_hash() == definition.content_hash()
    assert "on_failure: pause" not in text, "defaults are left out, as staff leave them out"


def raid_night() -> EventDefinition:
    return load_file(REPO / "examples" / "raid-night.yaml", validation_registry())


def test_edit_moves_the_events_channel_wherever_it_is_named_and_nowhere_else() -> None:
    definition = load_file(REPO / "examples" / "invasion.yaml", validation_registry())
    assert fields_of(definition).channel == "announcements"
    data = edited(definition, title="Invasion", at=None, channel="event-chat", capacity=None)
    channels = [s.get("params", {}).get("channel") for p in data["phases"] for s in p["steps"]]
    assert "announcements" not in channels and "event-chat" in channels
    assert "gm-cues" in channels or None in channels, "a cue's channel is left as it was"


def test_edit_changes_title_time_and_capacity_and_a_cron_schedule_is_left_alone() -> None:
    definition = raid_night()
    at = dt.datetime(2026, 12, 12, 20, 0, tzinfo=dt.UTC)
    data = edited(definition, title="Raid", at=at, channel=None, capacity=6)
    assert data["title"] == "Raid" and data["signup"]["capacity"] == 6
    assert data["schedule"] == {"cron": "0 19 * * SAT", "timezone": "Europe/Berlin"}
    assert "capacity" not in edited(definition, title="Raid", at=None, channel=None, capacity=None)["signup"]


def test_capacity_on_an_event_without_sign_ups_is_refused() -> None:
    definition = load_file(REPO / "examples" / "invasion.yaml", validation_registry())
    with pytest.raises(EditError, match="has no sign-ups"):
        edited(definition, title="x", at=None, channel=None, capacity=5)
