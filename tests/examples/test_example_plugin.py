"""examples/plugin, the example action plugin: made visible as if installed (its own
pyproject.toml's entry point, on a temporary path, nothing installed), it is listed by
``actions``, known to ``validate``, and its ``example.roll`` runs in a rehearsal."""

from __future__ import annotations

from pathlib import Path

import pytest

from actions import validation_registry
from tests.cli.conftest import EXAMPLE_CONFIG, Cli
from tests.support.plugins import EXAMPLE_PLUGIN, install_example

DICE_NIGHT = EXAMPLE_PLUGIN / "dice-night.yaml"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    install_example(monkeypatch, tmp_path / "site")


@pytest.mark.usefixtures("installed")
def test_the_example_plugin_is_listed_with_its_params_risk_and_package(cli: Cli) -> None:
    result = cli("actions")
    assert result.code == 0, result.out
    [row] = [line for line in result.lines if line.startswith("example.roll ")]
    assert row.split(maxsplit=4) == [
        "example.roll",
        "notify",
        "manual",
        "plugin",
        "dice (eventbot-example-dice 0.1.0)  required: channel; optional: dice, sides, title",
    ]


def test_validate_knows_the_plugins_action_only_when_it_is_installed(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    without = cli("validate", "--config", EXAMPLE_CONFIG, DICE_NIGHT)
    assert without.code == 1
    assert "unknown action 'example.roll'" in without.out
    install_example(monkeypatch, tmp_path / "site")
    result = cli("validate", "--config", EXAMPLE_CONFIG, DICE_NIGHT)
    assert result.code == 0, result.out
    assert f"ok    {DICE_NIGHT}: dice-night ('Dice night'): 1 phase, 2 steps" in result.out


@pytest.mark.usefixtures("installed")
def test_validate_checks_the_plugins_params_and_its_channel_against_the_config(
    cli: Cli, tmp_path: Path
) -> None:
    """The plugin's params model and its verify (the channel alias, through the delivery's
    check) are what validate applies, as it applies a built-in action's."""
    text = DICE_NIGHT.read_text(encoding="utf-8")
    no_dice = tmp_path / "no-dice.yaml"
    no_dice.write_text(text.replace("dice: 2", "dice: 0"), encoding="utf-8")
    result = cli("validate", "--config", EXAMPLE_CONFIG, no_dice)
    assert result.code == 1
    assert "phase 'roll', 2nd step, field 'params.dice': must be at least 1" in result.out
    tavern = tmp_path / "tavern.yaml"
    tavern.write_text(
        text.replace("channel: announcements\n          dice", "channel: tavern\n          dice")
    )
    result = cli("validate", "--config", EXAMPLE_CONFIG, tavern)
    assert result.code == 1
    [problem] = [line for line in result.lines if "2nd step" in line]
    assert "field 'params.channel'" in problem and "'tavern'" in problem


@pytest.mark.usefixtures("installed")
def test_a_rehearsal_runs_the_roll_and_shows_it_as_players_would_see_it(cli: Cli) -> None:
    result = cli("rehearse", "--config", EXAMPLE_CONFIG, DICE_NIGHT, "--cues", "confirm")
    assert result.code == 0, result.out + result.err
    assert "🎲 Roll for the treasure: 2d6 → " in result.out
    assert "rehearsal completed: 1 of 1 runs completed" in result.out


@pytest.mark.usefixtures("installed")
def test_a_retried_roll_rolls_the_same_dice() -> None:
    """Seeded with the step's idempotency key: a retry after a crash posts what the first
    attempt would have posted, never a second, different result."""
    from eventbot_example_dice import roll

    assert roll("run-1:step-2", 5, 1000) == roll("run-1:step-2", 5, 1000)
    assert roll("run-1:step-2", 5, 1000) != roll("run-2:step-2", 5, 1000)
    assert all(1 <= face <= 6 for face in roll("any", 20, 6))


@pytest.mark.usefixtures("installed")
def test_the_plugin_is_staged_by_the_same_builder_as_the_built_ins() -> None:
    registry = validation_registry()
    action = registry.get("example.roll")
    assert action is not None and (action.risk, action.reversible) == ("notify", "manual")
    assert registry.refused == []
