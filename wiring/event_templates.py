"""The templates ``/event create`` starts from: event definitions in YAML with ``${field}``
placeholders for what the form asks (``title``, ``when``, ``channel``, ``capacity``, ``key``).

Bundled ones are in ``wiring/templates/`` (shipped in the wheel); an operator adds their own, or
replaces a bundled one by its file name, in the config's ``templates_dir``. Each is read when it
is used, so a file dropped in the folder is offered at once, without a restart.

Why placeholders are filled in the data, not the text: a title typed as ``x"\\nphases: []`` put
into YAML text would change the definition's shape. Here the template is read first and each
string is filled in afterwards, so what staff type can only ever be a value; the filled data is
then written out as YAML and goes through exactly the checks an uploaded file does.

An optional ``template:`` mapping at the top says what the list shows (``description``) and what
the form starts with (``defaults``); it is taken off before filling. A value that is a whole
placeholder (``capacity: ${capacity}``) left empty in the form is dropped with its key, so an
optional field stays out of the definition rather than being stored empty.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner import yaml_text
from runner.definitions import parse_yaml
from runner.definitions.keys import KEY_MAX
from runner.errors import DefinitionError, UserFacingError

log = logging.getLogger(__name__)

BUNDLED = Path(__file__).with_name("templates")
# What the form can ask, in the order it asks it (a Discord modal holds at most five inputs).
FIELDS = ("title", "when", "channel", "capacity", "key")
# Beyond any real template; a folder with more is read up to this many, by name.
MAX_TEMPLATES = 100
MAX_TEMPLATE_BYTES = 64 * 1024
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", re.ASCII)


class TemplateError(UserFacingError):
    """That template cannot be used."""


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    # The definition as written, placeholders and all, without its ``template:`` mapping.
    body: dict[str, Any]
    # The form's fields it uses, in ``FIELDS`` order (``key`` always: every event has one).
    fields: tuple[str, ...]
    defaults: Mapping[str, str] = field(default_factory=dict)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def read_template(name: str, data: bytes) -> Template:
    """One template file's bytes as a ``Template``, or ``TemplateError`` saying what is wrong."""
    try:
        raw = parse_yaml(yaml_text.decode(data), file=f"{name}.yaml")
    except (yaml_text.YamlError, DefinitionError) as exc:
        raise TemplateError(f"template {name} is not readable YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise TemplateError(f"template {name} is not an event definition (a mapping of fields)")
    about = raw.pop("template", None) or {}
    if not isinstance(about, dict):
        raise TemplateError(f"template {name}: 'template:' must be a mapping (description, defaults)")
    used = {m for s in _strings(raw) for m in _PLACEHOLDER.findall(s)}
    unknown = sorted(used - set(FIELDS))
    if unknown:
        raise TemplateError(
            f"template {name} uses {', '.join('${' + u + '}' for u in unknown)}; a template may "
            f"use only {', '.join('${' + f + '}' for f in FIELDS)}"
        )
    defaults = about.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise TemplateError(f"template {name}: 'template.defaults' must be a mapping")
    return Template(
        name=name,
        description=str(about.get("description") or name)[:100],
        body=raw,
        fields=tuple(f for f in FIELDS if f in used or f == "key"),
        defaults={str(k): str(v) for k, v in defaults.items() if k in FIELDS and v is not None},
    )


def _files(folder: Path) -> list[Path]:
    try:
        found = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    except FileNotFoundError:
        # The example config names a folder an operator may never make: not worth a warning.
        log.debug("no templates folder %s", folder)
        return []
    except OSError as exc:
        log.warning("cannot read the templates folder %s: %s", folder, exc)
        return []
    return found[:MAX_TEMPLATES]


def template_files(operator_dir: str | None) -> dict[str, Path]:
    """Each template's name and file: the bundled ones, then the operator's (which replace a
    bundled one of the same name)."""
    folders = [BUNDLED] + ([Path(operator_dir)] if operator_dir else [])
    return {p.stem: p for folder in folders for p in _files(folder) if _NAME.fullmatch(p.stem)}


def load_template(name: str, operator_dir: str | None) -> Template:
    files = template_files(operator_dir)
    path = files.get(name)
    if path is None:
        offered = ", ".join(sorted(files)) or "none"
        raise TemplateError(f"There is no template {name[:64]!r}; the templates are: {offered}.")
    try:
        data = path.read_bytes()[: MAX_TEMPLATE_BYTES + 1]
    except OSError as exc:
        log.warning("cannot read template %s: %s", path, exc)
        raise TemplateError(f"Template {name} cannot be read on the bot's host.") from None
    if len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"Template {name} is larger than {MAX_TEMPLATE_BYTES // 1024} KB.")
    return read_template(name, data)


def list_templates(operator_dir: str | None) -> list[Template]:
    """Every template that can be read; one that cannot is logged and left out."""
    found = []
    for name in template_files(operator_dir):
        try:
            found.append(load_template(name, operator_dir))
        except TemplateError as exc:
            log.warning("%s", exc)
    return found


_DROP = object()


def _fill(value: Any, values: Mapping[str, str | int | None]) -> Any:
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            got = values.get(whole.group(1))
            return _DROP if got is None or got == "" else got
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1)) or ""), value)
    if isinstance(value, dict):
        filled = {k: _fill(v, values) for k, v in value.items()}
        return {k: v for k, v in filled.items() if v is not _DROP}
    if isinstance(value, list):
        return [v for v in (_fill(item, values) for item in value) if v is not _DROP]
    return value


def fill(template: Template, values: Mapping[str, str | int | None]) -> dict[str, Any]:
    """The template's definition with the form's values in place (see the module's note)."""
    filled = _fill(template.body, values)
    assert isinstance(filled, dict)
    return filled


def key_from_title(title: str, fallback: str) -> str:
    """A key made from a title: ``Raid Night #3`` → ``raid-night-3``."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:KEY_MAX].strip("-_")
    return slug or fallback


def as_yaml(data: Mapping[str, Any]) -> str:
    """Definition data written as YAML, fields in the order given, as a person would write it."""
    return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=100)
