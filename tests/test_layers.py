"""The layers, held by reading the source: what each package may import (issue 21).

``runner`` is the engine and its store, below everything; ``bridge`` holds the Discord-shaped
services on top of it, with no discord.py in them; the front ends (``bot``, ``rehearsal``,
``cli``) sit above both. Every import statement counts, at module level or inside a function,
since a lazy import is still a dependency. Nothing is imported to find this out: each file is
parsed (``ast``), so a layer broken only on some code path is still seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRONT_ENDS = ("bot", "rehearsal", "cli")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(package: str) -> dict[str, Path]:
    found = {module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}
    assert found, f"no source found under {package}/"
    return found


def imported_names(path: Path) -> set[str]:
    """Every module name ``path`` imports, relative imports made absolute; for ``from a import
    b`` both ``a`` and ``a.b`` (``b`` may be a module or a name in ``a``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def offending(package: str, forbidden: Iterable[str]) -> dict[str, list[str]]:
    """Each module of ``package`` that imports one of ``forbidden``, with what it imports."""
    banned = set(forbidden)
    found: dict[str, list[str]] = {}
    for name, path in modules_of(package).items():
        hits = sorted(n for n in imported_names(path) if n.partition(".")[0] in banned)
        if hits:
            found[name] = hits
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module to the modules of ``package`` it imports. Importing ``a.b.c`` runs ``a`` and
    ``a.b`` first, so a module's packages are edges too."""
    modules = modules_of(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for imported in imported_names(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            while imported:
                targets.add(imported)
                imported = imported.rpartition(".")[0]
        targets.discard(name)
        graph[name] = targets
    return graph


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def path_between(graph: dict[str, set[str]], source: str, target: str) -> list[str] | None:
    """A chain of imports from a module in package ``source`` to one in package ``target``."""
    starts = [name for name in graph if within(name, source)]
    came_from: dict[str, str | None] = dict.fromkeys(starts)
    queue = list(starts)
    while queue:
        current = queue.pop(0)
        if within(current, target):
            chain = [current]
            while (previous := came_from[chain[-1]]) is not None:
                chain.append(previous)
            return chain[::-1]
        for following in sorted(graph[current]):
            if following not in came_from:
                came_from[following] = current
                queue.append(following)
    return None


def test_the_walker_sees_imports_at_module_level_inside_functions_and_relative() -> None:
    # Without this, a walker that found nothing would pass every test below.
    assert offending("bot", ["discord"]), "the Discord front end imports discord"
    assert "runner.engine.core" in import_graph("runner")["runner.engine"]
    assert "runner.sql.definitions" in imported_names(ROOT / "bridge" / "listings.py"), (
        "imported in a function"
    )


@pytest.mark.parametrize("layer", ["discord", "bridge", *FRONT_ENDS])
def test_runner_imports_no_layer_above_it(layer: str) -> None:
    assert offending("runner", [layer]) == {}


@pytest.mark.parametrize("layer", ["discord", *FRONT_ENDS])
def test_bridge_imports_neither_discord_nor_a_front_end(layer: str) -> None:
    assert offending("bridge", [layer]) == {}


def test_the_definition_check_does_not_import_the_rehearsal() -> None:
    # ``validate`` and ``publish`` check aliases by the rule the rehearsal's delivery applies
    # (``wiring.aliases``), without building a rehearsal.
    assert offending("wiring", ["rehearsal", "discord", "bot", "cli"]) == {}


def test_the_kinds_the_store_and_the_run_log_share_are_a_leaf() -> None:
    assert not {name for name in imported_names(ROOT / "runner" / "kinds.py") if within(name, "runner")}


def test_the_run_log_and_the_statements_are_not_in_an_import_cycle() -> None:
    graph = import_graph("runner")
    assert path_between(graph, "runner.history", "runner.sql") is not None, "the run log is read through SQL"
    back = path_between(graph, "runner.sql", "runner.history")
    assert back is None, " imports ".join(back or [])


# ── The house's shape (issue 27): held here so it outlives the refactor that made it ──

PRODUCT = ("runner", "bridge", "wiring", "actions", "bot", "cli", "rehearsal")
MODULE_MAX_LINES = 450
# The only modules that may wake a loop by hand: the loop base itself, and the ticker, which
# wakes on the bus events it subscribes to. Everything else publishes an event.
WAKERS = {"bot.background", "bot.ticker"}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_bot_has_no_import_cycle() -> None:
    """The loops once imported ``bot.app`` (for the bot they were handed) while ``bot.app`` built
    them; each is handed ``bot.background.Background`` now."""
    assert cycles(import_graph("bot")) == []


def test_no_feature_of_the_bot_imports_the_bot() -> None:
    assert {
        name: hits
        for name, hits in (
            (n, sorted(h for h in imported_names(p) if within(h, "bot.app")))
            for n, p in modules_of("bot").items()
        )
        if hits and within(name, "bot.cogs")
    } == {}


def calls_named(path: Path, names: set[str]) -> list[int]:
    """Lines of ``path`` that call a method named one of ``names`` (``x.nudge()``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
    ]


def test_no_loop_is_woken_by_hand_outside_the_loop_base() -> None:
    """Whoever changes something publishes an event on the runner's bus after its commit; the
    loops that follow it subscribe. A hand-written ``.nudge()`` (17 of them once) couples the
    changer to every follower and is forgotten by the next feature."""
    found = {
        name: lines
        for name, path in modules_of("bot").items()
        if (lines := calls_named(path, {"nudge", "wake"} if name not in WAKERS else {"nudge"}))
    }
    assert found == {}


def test_no_product_module_calls_a_nudge() -> None:
    """Outside the bot too: a run's row is woken for other processes by ``run_leases.wake_now``,
    a loop in this process by an event on the bus; nothing calls a ``nudge``."""
    found = {
        module_name(path): lines
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if (lines := calls_named(path, {"nudge"}))
    }
    assert found == {}


def test_the_walker_sees_a_hand_wake(tmp_path: Path) -> None:
    source = tmp_path / "loop.py"
    source.write_text("def changed(loop):\n    loop.nudge()\n", encoding="utf-8")
    assert calls_named(source, {"nudge"}) == [2]


def test_no_product_module_is_over_450_lines() -> None:
    long = {
        module_name(path): lines
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_MAX_LINES
    }
    assert long == {}
