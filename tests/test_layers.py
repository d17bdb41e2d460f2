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
