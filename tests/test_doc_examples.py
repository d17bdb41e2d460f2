"""Every YAML example in README.md and docs/ validates, against the example config's aliases,
as ``python -m bot validate --config config.example.yaml`` would (issue 26 item 5: three doc
examples failed validate, and nothing noticed).

An example may be a whole event or a fragment of one (``signup:`` alone, a few steps): a
fragment is completed with the fields it lacks (a key, a title, a manual schedule, one phase)
and validated as that event, so what it shows is still checked. A block that is not meant to be
an event at all is fenced as ``yaml not-an-event`` and left out."""

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
FILLED = {
    "key": "doc-example",
    "title": "A documentation example",
    "schedule": "manual",
    "phases": [
        {"key": "main", "label": "Main", "steps": [{"action": "core.wait", "params": {"duration": "1m"}}]}
    ],
}


def examples() -> list[Any]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            if "not-an-event" in match.group(1):
                continue
            line = text[: match.start()].count("\n") + 1
            found.append(pytest.param(match.group(2), id=f"{page.name}:{line}"))
    return found


def test_the_docs_have_examples_to_check() -> None:
    assert len(examples()) >= 5


@pytest.mark.parametrize("text", examples())
def test_every_yaml_example_in_the_docs_validates(text: str, tmp_path: Path) -> None:
    raw = yaml.safe_load(text)
    assert isinstance(raw, dict), "an example is a mapping of an event's fields"
    path = tmp_path / "example.yaml"
    path.write_text(yaml.safe_dump({**FILLED, **raw}, sort_keys=False), encoding="utf-8")
    [checked] = check_files([path], load(REPO / "config.example.yaml"))
    assert checked.problems == []
