"""The README's quick start, its first event, and the command line's help.

The first quick-start command (``scripts/demo.py``) is run here as far as the process boundary:
its virtual-environment set-up is replaced, the command it would ``exec`` is captured, and that
very command line is run through ``cli.main``. The second command's job, validating every
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

from tests.cli.conftest import EXAMPLE_CONFIG, EXAMPLE_FILES, EXAMPLES, REPO, Cli

README = REPO / "README.md"
GUARANTEES = REPO / "docs" / "GUARANTEES.md"


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
    # The guarantees and the Tests section moved to docs/GUARANTEES.md (issue 12); the README links it.
    assert "](docs/GUARANTEES.md)" in README.read_text(encoding="utf-8")
    text = GUARANTEES.read_text(encoding="utf-8")
    for heading, must_mention in (
        ("## What the runner guarantees", "test_sql_contract"),
        ("## Tests", "python3 scripts/test.py"),
    ):
        assert heading in text
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        assert must_mention in section
        assert "lead fills" not in section


def test_ci_runs_the_second_quick_start_command_with_every_tier() -> None:
    assert "python3 scripts/test.py --all" in (REPO / ".ci" / "run").read_text()


def test_defect_a_users_config_yaml_in_the_root_broke_the_demo(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """setup.md has a user create config.yaml in the repository root, with their own server's
    aliases; the demo (and the test of it) read it and failed. The demo names the example config."""
    root = tmp_path / "checkout"
    (root / "examples").mkdir(parents=True)
    (root / "examples" / "invasion.yaml").write_bytes((REPO / "examples" / "invasion.yaml").read_bytes())
    (root / "config.example.yaml").write_bytes((REPO / "config.example.yaml").read_bytes())
    (root / "config.yaml").write_text("channels: {general: 1}\nroles: {members: 2}\n", encoding="utf-8")
    demo = load_demo()
    execs: list[list[str]] = []
    monkeypatch.setattr(demo, "ensure_venv", lambda: Path(sys.executable))
    monkeypatch.setattr(demo, "ROOT", root)
    monkeypatch.setattr(os, "execv", lambda path, argv: execs.append(argv))
    monkeypatch.setattr(sys, "argv", ["scripts/demo.py"])
    monkeypatch.chdir(tmp_path)  # restored after the test: the demo changes directory
    demo.main()
    capsys.readouterr()
    [argv] = execs
    result = cli(*argv[3:])
    assert result.code == 0, result.out
    assert result.out.startswith("config: config.example.yaml")
    assert result.out.rstrip().endswith("rehearsal completed: 3 of 3 runs completed")


def test_the_demo_rehearses_the_invasion_to_completion(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = load_demo()
    execs: list[list[str]] = []

    def fake_exec(path: str, argv: list[str]) -> None:
        execs.append(argv)

    monkeypatch.setattr(demo, "ensure_venv", lambda: Path(sys.executable))
    monkeypatch.setattr(os, "execv", fake_exec)
    monkeypatch.setattr(sys, "argv", ["scripts/demo.py", "--scope", "aurora"])
    monkeypatch.chdir(REPO)
    demo.main()
    capsys.readouterr()
    [argv] = execs
    assert argv[:3] == [sys.executable, "-m", "bot"]
    assert argv[3:] == [
        "rehearse",
        "examples/invasion.yaml",
        "--config",
        "config.example.yaml",
        "--cues",
        "confirm",
        "--scope",
        "aurora",
    ]

    result = cli(*argv[3:])
    assert result.code == 0
    assert "[+00:00:00] run 1 aurora: announcement in #announcements, pings @invasion-alerts" in result.out
    assert "GM cue in #gm-cues, pings @game-masters" in result.out
    assert "[+00:30:00] run 1 aurora: completed (health ok)" in result.out
    assert result.out.rstrip().endswith("rehearsal completed: 1 of 1 runs completed")


def first_event_section() -> str:
    return README.read_text(encoding="utf-8").split("## Your first event", 1)[1].split("\n## ", 1)[0]


def shown_output(section: str, command: str) -> list[str]:
    """The lines the README shows under ``$ command`` (an indented block), "..." left out."""
    block = section.split(f"    $ {command}\n", 1)[1].split("\n\n", 1)[0]
    return [line[4:].rstrip() for line in block.splitlines() if line.strip() != "..."]


def test_the_readme_first_event_validates_and_rehearses_as_shown(cli: Cli, tmp_path: Path) -> None:
    # The walk-through is what a newcomer copies: the definition must be valid against the
    # example config, and what the README says validate and rehearse print must be what they print.
    section = first_event_section()
    yaml_block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert yaml_block, "the first event has its definition"
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "harbour-race.yaml").write_text(yaml_block.group(1), encoding="utf-8")
    (tmp_path / "config.yaml").write_text(EXAMPLE_CONFIG.read_text(encoding="utf-8"), encoding="utf-8")

    validate = "python -m bot validate events/harbour-race.yaml"
    result = cli(*validate.split()[3:])
    assert result.code == 0
    assert result.lines == shown_output(section, validate)

    rehearse = "python -m bot rehearse events/harbour-race.yaml --cues confirm"
    result = cli(*rehearse.split()[3:])
    assert result.code == 0
    printed = [line.rstrip() for line in result.lines]
    shown = shown_output(section, rehearse)
    assert shown, "the README shows the rehearsal's output"
    # In order, with the lines the README leaves out ("...") in between.
    position = 0
    for line in shown:
        assert line in printed[position:], f"the rehearsal does not print {line!r} where the README shows it"
        position = printed.index(line, position) + 1

    database = f"sqlite+aiosqlite:///{tmp_path / 'first.sqlite3'}"
    assert cli("migrate", "--database", database).code == 0
    result = cli("publish", "--database", database)
    assert result.code == 0
    assert "`published harbour-race v1`" in section
    assert result.out.startswith("published harbour-race v1")


def test_every_example_validates(cli: Cli) -> None:
    result = cli("validate", EXAMPLES)
    assert result.code == 0
    assert result.lines[-1] == f"{len(EXAMPLE_FILES)} valid, 0 invalid"


COMMAND_OPTIONS = {
    "rehearse": ["--cues", "--speed", "--scope", "--json", "--database", "Exit code"],
    "validate": ["FILE", "phase", "step", "field"],
    "publish": ["FILE", "--database", "definitions_dir", "nothing is published"],
    "migrate": ["--database", "upgrade"],
    "runs": ["--all", "--limit", "--json", "--database"],
    "run": ["DISCORD_TOKEN"],
    "sync": ["--guild", "--global", "DISCORD_TOKEN"],
}


@pytest.mark.parametrize("command", sorted(COMMAND_OPTIONS))
def test_help_on_each_command_is_useful(cli: Cli, command: str) -> None:
    result = cli(command, "--help")
    assert result.code == 0
    assert result.out.startswith(f"usage: python -m bot {command}")
    for word in [*COMMAND_OPTIONS[command], "--config"]:
        assert word in result.out, f"{command} --help does not mention {word}"


def test_top_level_help_lists_every_command(cli: Cli) -> None:
    result = cli("--help")
    assert result.code == 0
    for command in COMMAND_OPTIONS:
        assert re.search(rf"^\s+{command}\s", result.out, re.M), command


def test_no_command_is_a_usage_error(cli: Cli) -> None:
    result = cli()
    assert result.code == 2
    assert "the following arguments are required: COMMAND" in result.err
