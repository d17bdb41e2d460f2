"""Action plugins (issue 29 item 1): a package's entry point in ``eventbot.actions`` is staged and
checked as a built-in module is; a plugin that fails in any way registers nothing, as a whole,
says why in ``registry.refused``, and leaves the built-ins and the other plugins as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from actions import plugin_problems, validation_registry
from tests.support.plugins import install

# A plugin module with two well-formed actions; each test spoils it one way.
GOOD = """
from pydantic import BaseModel

from runner.registry import Action


class Params(BaseModel):
    target: str
    amount: int = 1


async def perform(envelope, params):
    return {"ok": True}


def action(id, risk="moderate", reversible="manual"):
    return Action(
        id=id, label=id, risk=risk, reversible=reversible, version=1, budget_ms=1000,
        params_model=Params, perform=perform,
    )


def register(staging):
    staging.register([action("shop.give"), action("shop.take")])
"""


def plugin(monkeypatch: pytest.MonkeyPatch, where: Path, name: str, source: str) -> None:
    install(
        monkeypatch, where, f"eventbot-{name}", {name: f"{name}_plugin:register"}, {f"{name}_plugin": source}
    )


def test_a_good_plugin_registers_its_actions_and_is_named_as_their_owner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin(monkeypatch, tmp_path, "shop", GOOD)
    registry = validation_registry()
    assert {"shop.give", "shop.take"} <= set(registry.ids())
    assert registry.owner("shop.give") == "plugin shop (eventbot-shop 1.0)"
    assert registry.owner("core.wait") == "core"
    assert plugin_problems(registry) == []


def test_a_plugin_that_raises_on_import_registers_nothing_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin(monkeypatch, tmp_path, "shop", "raise RuntimeError('the shop database is missing')\n" + GOOD)
    registry = validation_registry()
    assert "shop.give" not in registry
    assert plugin_problems(registry) == [
        "plugin shop (eventbot-shop 1.0): could not be imported: RuntimeError: the shop database is missing"
    ]


def test_a_plugin_that_exits_on_import_is_refused_and_the_process_lives_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin(monkeypatch, tmp_path, "shop", "import sys\nsys.exit('no shop today')\n")
    assert plugin_problems() == [
        "plugin shop (eventbot-shop 1.0): could not be imported: SystemExit: no shop today"
    ]


def test_a_plugin_whose_entry_point_names_a_missing_module_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(monkeypatch, tmp_path, "eventbot-ghost", {"ghost": "no_such_module_here:register"})
    [problem] = plugin_problems()
    assert problem.startswith("plugin ghost (eventbot-ghost 1.0): could not be imported: ModuleNotFoundError")


def test_one_malformed_action_keeps_every_action_of_its_plugin_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A bad risk value on one action: the well-formed one beside it is not registered either,
    so a deployment never runs half a plugin."""
    spoiled = GOOD.replace('action("shop.take")', 'action("shop.take", risk="spicy")')
    plugin(monkeypatch, tmp_path, "shop", spoiled)
    registry = validation_registry()
    assert "shop.give" not in registry and "shop.take" not in registry
    assert plugin_problems(registry) == [
        "plugin shop (eventbot-shop 1.0): action shop.take: "
        "risk 'spicy' must be one of none, notify, moderate, destructive"
    ]


def test_a_plugin_naming_a_built_in_action_registers_nothing_and_the_built_in_stays(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin(monkeypatch, tmp_path, "shop", GOOD.replace('action("shop.take")', 'action("core.wait")'))
    registry = validation_registry()
    assert "shop.give" not in registry
    assert registry.owner("core.wait") == "core"
    wait = registry.get("core.wait")
    assert wait is not None and wait.label == "Wait"
    assert plugin_problems(registry) == [
        "plugin shop (eventbot-shop 1.0): action core.wait: already registered by another module"
    ]


def test_two_plugins_naming_one_action_are_both_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Neither wins: which would depend on the order the packages happen to be found in, so a
    step could change meaning when someone reinstalls."""
    plugin(monkeypatch, tmp_path, "shop", GOOD)
    plugin(monkeypatch, tmp_path, "bank", GOOD.replace('"shop.take"', '"bank.take"'))
    registry = validation_registry()
    assert not {"shop.give", "shop.take", "bank.take"} & set(registry.ids())
    assert sorted(plugin_problems(registry)) == [
        "plugin bank (eventbot-bank 1.0): action shop.give is also registered by plugin shop (eventbot-shop 1.0)",
        "plugin shop (eventbot-shop 1.0): action shop.give is also registered by plugin bank (eventbot-bank 1.0)",
    ]


def test_a_plugin_that_raises_while_registering_registers_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = GOOD.replace(
        'staging.register([action("shop.give"), action("shop.take")])',
        'staging.register([action("shop.give")])\n    raise KeyError("price list")',
    )
    plugin(monkeypatch, tmp_path, "shop", source)
    registry = validation_registry()
    assert "shop.give" not in registry
    assert plugin_problems(registry) == [
        "plugin shop (eventbot-shop 1.0): raised while registering: KeyError: 'price list'"
    ]


def test_an_entry_point_that_is_not_callable_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(
        monkeypatch,
        tmp_path,
        "eventbot-shop",
        {"shop": "shop_plugin:ACTIONS"},
        {"shop_plugin": "ACTIONS = []\n"},
    )
    assert plugin_problems() == [
        "plugin shop (eventbot-shop 1.0): shop_plugin:ACTIONS is not callable (it must take the staging)"
    ]


def test_an_action_too_malformed_to_check_is_a_refusal_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An id that is a list cannot even be looked up: still one refused plugin, not a registry
    that fails to build (which would stop the bot and every validate)."""
    plugin(monkeypatch, tmp_path, "shop", GOOD.replace('action("shop.take")', 'action(["shop", "take"])'))
    registry = validation_registry()
    assert "shop.give" not in registry
    [problem] = plugin_problems(registry)
    assert problem.startswith("plugin shop (eventbot-shop 1.0): ")


def test_a_refused_plugin_leaves_the_good_ones_registered(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin(monkeypatch, tmp_path, "shop", GOOD)
    plugin(monkeypatch, tmp_path, "bank", "import not_installed_anywhere\n")
    registry = validation_registry()
    assert {"shop.give", "shop.take"} <= set(registry.ids())
    [problem] = plugin_problems(registry)
    assert problem.startswith("plugin bank (eventbot-bank 1.0): could not be imported")


def test_a_plugins_long_error_is_cut_to_one_short_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin(monkeypatch, tmp_path, "shop", f"raise ValueError({'x' * 5000!r} + '\\n' + 'y')\n")
    [problem] = plugin_problems()
    assert "\n" not in problem and len(problem) < 300
