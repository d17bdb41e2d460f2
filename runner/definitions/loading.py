"""Definitions read: YAML text or a file parsed and validated, or a stored version rebuilt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner import yaml_text
from runner.definitions.model import EventDefinition
from runner.definitions.validation import validate
from runner.errors import DefinitionError, Problem
from runner.registry import ActionRegistry


def parse_yaml(text: str | bytes, *, file: str | None = None) -> Any:
    """Parse a definition's YAML (bytes are decoded as UTF-8); ``DefinitionError`` with the line
    and column for anything unreadable."""
    try:
        return yaml_text.parse(yaml_text.decode(text) if isinstance(text, bytes) else text)
    except yaml_text.YamlError as exc:
        raise DefinitionError([Problem(str(exc), file=file)]) from None


def read_file(path: str | Path) -> Any:
    """A definition file, parsed; ``DefinitionError`` naming the file if it cannot be read."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DefinitionError(
            [Problem(f"cannot read the file: {exc.strerror or exc}", file=str(path))]
        ) from None
    return parse_yaml(data, file=str(path))


def load_file(path: str | Path, registry: ActionRegistry) -> EventDefinition:
    return validate(read_file(path), registry, file=str(Path(path)))


def from_spec(spec: dict[str, Any]) -> EventDefinition:
    """Rebuild a stored version's definition (already validated when it was published)."""
    return EventDefinition.model_validate(spec)
