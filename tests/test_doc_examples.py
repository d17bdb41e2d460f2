"""Every YAML example in README.md and docs/ validates, against the example config's aliases,
as ``python -m bot validate --config config.example.yaml`` would (issue 26 item 5: three doc
examples failed validate, and nothing noticed).

The code fence says what a block is (docs/architecture.md, "Examples in the docs"):

* ```` ```yaml ````: a whole event, validated exactly as written, so a doc example a user copies
  into a file of their own validates there too;
* ```` ```yaml fragment ````: part of one (``signup:`` alone, a few steps), completed with the
  fields it lacks (a key, a title, a manual schedule, one phase) and validated as that event, so
  what it shows is still checked;
* ```` ```yaml not-an-event ````: not an event at all, left out.

Any other word after ``yaml`` fails, so a misspelt mark cannot hide an example."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.definitions import check_files
from wiring.config import load

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```yaml([^\n]*)\n(.*?)^```", re.M | re.S)
MARKS = {"": "whole", "fragment": "fragment", "not-an-event": "not-an-event"}
FILLED = {
    "key": "doc-example",
    "title": "A documentation example",
    "schedule": "manual",
    "phases": [
        {"key": "main", "label": "Main", "steps": [{"action": "core.wait", "params": {"duration": "1m"}}]}
    ],
}


def blocks() -> list[tuple[str, str, str]]:
    """(where, mark, text) of every ```yaml block, where as ``page:line``."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.name}:{line}", match.group(1).strip(), match.group(2)))
    return found


def examples() -> list[Any]:
    return [
        pytest.param(MARKS[mark], text, id=f"{where} {MARKS[mark]}")
        for where, mark, text in blocks()
        if MARKS.get(mark) in ("whole", "fragment")
    ]


def event_of(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The event an example is validated as: a fragment completed, a whole one as written."""
    return {**FILLED, **raw} if kind == "fragment" else raw


def problems_of(event: dict[str, Any], tmp_path: Path) -> list[str]:
    path = tmp_path / "example.yaml"
    path.write_text(yaml.safe_dump(event, sort_keys=False), encoding="utf-8")
    [checked] = check_files([path], load(REPO / "config.example.yaml"))
    return [str(problem) for problem in checked.problems]


def test_the_docs_have_whole_examples_and_fragments_to_check() -> None:
    kinds = [param.values[0] for param in examples()]
    assert kinds.count("whole") >= 2, "README.md's quick example and writing-events.md's reference"
    assert kinds.count("fragment") >= 4


def test_every_yaml_block_is_marked_with_a_known_word() -> None:
    unknown = [(where, mark) for where, mark, _ in blocks() if mark not in MARKS]
    assert unknown == [], "after ```yaml write nothing (a whole event), fragment or not-an-event"


@pytest.mark.parametrize(("kind", "text"), examples())
def test_every_yaml_example_in_the_docs_validates(kind: str, text: str, tmp_path: Path) -> None:
    raw = yaml.safe_load(text)
    assert isinstance(raw, dict), "an example is a mapping of an event's fields"
    assert problems_of(event_of(kind, raw), tmp_path) == []


def test_a_fragment_is_marked_only_when_it_lacks_a_field_of_a_whole_event() -> None:
    """Marking a whole event ``fragment`` would let the filling hide a field it got wrong."""
    whole = [
        where
        for where, mark, text in blocks()
        if mark == "fragment"
        and isinstance(raw := yaml.safe_load(text), dict)
        and FILLED.keys() <= raw.keys()
    ]
    assert whole == []


def test_defect_a_whole_example_is_checked_as_written_not_filled_in(tmp_path: Path) -> None:
    """Before: every example was completed with a key, a title, a schedule and a phase, so a whole
    example that left out a field it needs passed the test and failed validate for the user who
    copied it. Now: only a block marked fragment is completed."""
    untitled = {key: value for key, value in FILLED.items() if key != "title"}
    assert any("'title'" in problem for problem in problems_of(event_of("whole", untitled), tmp_path))
    assert problems_of(event_of("fragment", untitled), tmp_path) == []
