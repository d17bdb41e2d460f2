"""``python -m bot actions``: every action a step may name, with its params, risk, reversibility
and origin, and the plugins refused, without a database, a config or Discord."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.support.plugins import install


def test_every_built_in_action_is_listed_with_params_risk_undo_and_origin(cli: Cli, tmp_path: Path) -> None:
    """Run in an empty directory (no config, no database file): nothing but the registry is read,
    and nothing is created."""
    result = cli("actions")
    assert result.code == 0, result.err
    header, *rows = result.lines
    assert header.split() == ["ACTION", "RISK", "REVERSIBLE", "FROM", "PARAMS"]
    listed = {row.split()[0]: row.split(maxsplit=4) for row in rows}
    assert set(listed) == {
        "core.wait",
        "discord.announce",
        "discord.dm_attendees",
        "discord.signup",
        "discord.thread",
        "gm.cue",
        "rcon.command",
        "webhook.post",
    }
    assert listed["core.wait"] == ["core.wait", "none", "none", "core", "required: duration"]
    assert listed["webhook.post"] == [
        "webhook.post",
        "moderate",
        "automatic",
        "webhook",
        "required: target; optional: body, undo",
    ]
    assert listed["discord.signup"][4] == "optional: channel, content"
    assert list(tmp_path.iterdir()) == []


def test_a_refused_plugin_is_listed_after_the_table_and_the_exit_code_is_1(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(
        monkeypatch, tmp_path, "eventbot-shop", {"shop": "shop_plugin:register"}, {"shop_plugin": "1/0\n"}
    )
    result = cli("actions")
    assert result.code == 1
    assert result.out.endswith(
        "\n\nplugins refused (each registered nothing):\n"
        "  - plugin shop (eventbot-shop 1.0): could not be imported: ZeroDivisionError: division by zero\n"
    )
    assert "core.wait" in result.out, "the built-ins are listed all the same"


def test_json_gives_one_object_per_action_and_per_refusal(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(
        monkeypatch, tmp_path, "eventbot-shop", {"shop": "shop_plugin:register"}, {"shop_plugin": "1/0\n"}
    )
    records = [json.loads(line) for line in cli("actions", "--json").lines]
    wait = next(r for r in records if r.get("id") == "core.wait")
    assert wait == {
        "type": "action",
        "id": "core.wait",
        "label": "Wait",
        "risk": "none",
        "reversible": "none",
        "from": "core",
        "required": ["duration"],
        "optional": [],
    }
    assert [r["problem"] for r in records if r["type"] == "refused"] == [
        "plugin shop (eventbot-shop 1.0): could not be imported: ZeroDivisionError: division by zero"
    ]
