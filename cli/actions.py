"""``actions``: every action a step may name, the built-in ones and the plugins', with its params,
risk and reversibility and the module or plugin it came from, then the plugins that were refused
and why. Built as ``validate`` builds its registry, so it needs neither a database nor Discord."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from actions import validation_registry
from cli.common import EXIT_FAILED, EXIT_OK
from runner.registry import Action, ActionRegistry

DESCRIPTION = (
    "List every action a step may name: the built-in ones and those of the installed plugins\n"
    "(packages with an entry point in the eventbot.actions group). For each: its params (required\n"
    "and optional, by name), its risk (none, notify, moderate, destructive), whether it can be\n"
    "undone (none, manual, automatic) and where it came from (a built-in module, or 'plugin NAME\n"
    "(package version)'). A plugin that failed to load registers nothing; each of its problems\n"
    "is listed after the table. Needs neither a database nor Discord.\n\n"
    "Exit code: 0, or 1 when a plugin was refused."
)
COLUMNS = ("ACTION", "RISK", "REVERSIBLE", "FROM", "PARAMS")


def register(command: Callable[..., Any]) -> None:
    """The ``actions`` subcommand, added by ``cli.build_parser``."""
    sub = command(
        "actions",
        "list every action (built-in and plugins') with its params, risk and undo",
        DESCRIPTION,
        cmd_actions,
    )
    sub.add_argument("--json", action="store_true", help="one JSON object per action, then one per refusal")


def params_of(action: Action[Any]) -> tuple[list[str], list[str]]:
    """The names of the action's params: required, then optional."""
    fields = action.params_model.model_fields
    required = [name for name, info in fields.items() if info.is_required()]
    return required, [name for name in fields if name not in required]


def _params_text(action: Action[Any]) -> str:
    required, optional = params_of(action)
    parts = []
    if required:
        parts.append("required: " + ", ".join(required))
    if optional:
        parts.append("optional: " + ", ".join(optional))
    return "; ".join(parts) or "none"


def table(registry: ActionRegistry) -> list[str]:
    rows = [
        (a.id, a.risk, a.reversible, registry.owner(a.id) or "?", _params_text(a)) for a in registry.actions()
    ]
    widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS) - 1)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
        for row in [COLUMNS, *rows]
    ]


def cmd_actions(args: argparse.Namespace) -> int:
    registry = validation_registry()
    if args.json:
        for action in registry.actions():
            required, optional = params_of(action)
            record = {
                "type": "action",
                "id": action.id,
                "label": action.label,
                "risk": action.risk,
                "reversible": action.reversible,
                "from": registry.owner(action.id),
                "required": required,
                "optional": optional,
            }
            print(json.dumps(record))
        for problem in registry.refused:
            print(json.dumps({"type": "refused", "problem": problem}))
    else:
        print("\n".join(table(registry)))
        if registry.refused:
            print("\nplugins refused (each registered nothing):")
            print("\n".join(f"  - {problem}" for problem in registry.refused))
    return EXIT_FAILED if registry.refused else EXIT_OK
