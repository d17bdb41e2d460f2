"""Every REST request the bot makes, held to Discord's own OpenAPI description of its HTTP API.

The description is vendored in ``discord-openapi/`` (see its README for where it comes from).
:func:`spec` loads and indexes it once per process; :meth:`DiscordOpenAPI.problems` lists what
is wrong with one request, as simcord recorded it: the method and path as sent, the query
parameters and the JSON body (for a multipart request, its ``payload_json`` part, which is how
Discord reads a multipart body too). A request conforms when

* its path matches a route template (the most literal one wins, so ``/users/@me`` is not
  ``/users/{user_id}``), and every path parameter satisfies its schema;
* the route has the method;
* every query parameter is one the operation declares, and its wire form satisfies the
  parameter's schema. On the wire every value is a string; booleans are read as Discord's docs
  ("Boolean Query Strings") say the API reads them, ``True``/``true``/``1`` and
  ``False``/``false``/``0``, and any other spelling is refused;
* the body is present exactly when the operation takes one, and validates against the
  ``application/json`` request schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect: ``$ref``,
  ``oneOf``/``anyOf``/``allOf`` and nullable type lists, all resolved by ``jsonschema``).

Normalisation. The spec differs from what Discord accepts in two documented ways, and only those
are relaxed, each only where the spec marks the field:

* **Snowflakes**: ``SnowflakeType`` (and any schema with its digits-only pattern) is a string,
  but Discord takes snowflakes as JSON numbers too, and discord.py sends them as numbers (for
  example in ``allowed_mentions.roles``). Such a field also accepts a non-negative integer.
* **Permission bit sets**: Discord's docs serialise these as strings, the spec types some as
  integers (``default_member_permissions``, ``permissions``, and an overwrite's ``allow`` and
  ``deny``), and discord.py sends strings. An integer-typed property of one of those names also
  accepts a string of decimal digits, no longer than the schema's maximum.

Nothing else is relaxed, and nothing is made stricter than the spec: an object accepts keys it
does not list unless the spec closes it, as JSON Schema does (discord.py sends a few keys the
spec has not caught up with, such as a command's ``nsfw``, and Discord ignores unknown keys).
Formats (``uri``, ``date-time``, ...) stay annotations, as JSON Schema 2020-12 has them by default.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).with_name("discord-openapi") / "openapi.json"
# The base URI the document is registered under, so the spec's own "#/components/..." refs
# resolve from any schema inside it.
BASE_URI = "urn:discord-openapi"
SNOWFLAKE_PATTERN = "^(0|[1-9][0-9]*)$"
PERMISSION_FIELDS = frozenset({"permissions", "default_member_permissions", "allow", "deny"})
QUERY_TRUE = frozenset({"True", "true", "1"})
QUERY_FALSE = frozenset({"False", "false", "0"})
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


class SpecMismatch(AssertionError):
    """Requests the bot made that Discord's OpenAPI description refuses."""


@dataclass(frozen=True)
class Operation:
    """One method of one route, as the spec describes it."""

    template: str
    method: str
    path_params: Mapping[str, str]  # name -> JSON pointer to its schema
    query_params: Mapping[str, str]
    body_pointer: str | None  # JSON pointer to the application/json request schema
    body_required: bool

    @property
    def route(self) -> str:
        return f"{self.method} {self.template}"


class DiscordOpenAPI:
    """The normalised spec, its routes indexed by segment count, and compiled validators."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = normalise(document)
        resource = Resource(contents=self.document, specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(BASE_URI, resource)
        self._routes: dict[int, list[tuple[list[str], str]]] = {}
        for template in self.document["paths"]:
            segments = template.strip("/").split("/")
            self._routes.setdefault(len(segments), []).append((segments, template))

    def operation(self, method: str, path: str) -> Operation | str:
        """The operation ``method path`` calls, or why there is none."""
        segments = path.split("?", 1)[0].strip("/").split("/")
        best: tuple[int, str] | None = None
        for template_segments, template in self._routes.get(len(segments), ()):
            literals = 0
            for tpl, seg in zip(template_segments, segments, strict=True):
                if tpl == seg:
                    literals += 1
                elif not (tpl.startswith("{") and tpl.endswith("}")):
                    break
            else:
                if best is None or literals > best[0]:
                    best = (literals, template)
        if best is None:
            return f"{method} {path}: no route in Discord's OpenAPI description matches this path"
        template = best[1]
        item = self.document["paths"][template]
        if method.lower() not in item:
            allowed = ", ".join(m.upper() for m in METHODS if m in item)
            return f"{method} {path}: route {template} has no {method} (it has {allowed})"
        return self._operation(template, method.upper())

    @functools.cache  # noqa: B019 - one instance per process, never collected
    def _operation(self, template: str, method: str) -> Operation:
        item = self.document["paths"][template]
        route_pointer = f"/paths/{_escape(template)}"
        pointer = f"{route_pointer}/{method.lower()}"
        op = item[method.lower()]
        # Parameter name -> JSON pointer to its schema; the operation's own override the route's.
        params: dict[tuple[str, str], str] = {}
        for base, declared in ((route_pointer, item), (pointer, op)):
            for i, param in enumerate(declared.get("parameters", ())):
                params[(param["in"], param["name"])] = f"{base}/parameters/{i}/schema"
        body = op.get("requestBody")
        body_pointer = None
        if body is not None:
            if "application/json" not in body["content"]:
                raise NotImplementedError(
                    f"{method} {template} takes no JSON body; teach the checker its form"
                )
            body_pointer = f"{pointer}/requestBody/content/application~1json/schema"
        return Operation(
            template=template,
            method=method,
            path_params={name: p for (where, name), p in params.items() if where == "path"},
            query_params={name: p for (where, name), p in params.items() if where == "query"},
            body_pointer=body_pointer,
            body_required=bool(body and body.get("required")),
        )

    @functools.cache  # noqa: B019 - one instance per process, never collected
    def _validator(self, pointer: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"{BASE_URI}#{pointer}"}, registry=self._registry)

    def problems(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any) -> list[str]:
        """Everything wrong with one request; empty when it conforms."""
        found = self.operation(method, path)
        if isinstance(found, str):
            return [found]
        op = found
        where = f"{method} {path} ({op.route})"
        problems: list[str] = []
        segments = path.split("?", 1)[0].strip("/").split("/")
        for tpl, seg in zip(op.template.strip("/").split("/"), segments, strict=True):
            if tpl.startswith("{"):
                name = tpl[1:-1]
                if name not in op.path_params:
                    problems.append(f"{where}: the spec declares no schema for path parameter {name}")
                    continue
                problems += self._value_problems(where, f"path parameter {name}", seg, op.path_params[name])
        for name, value in (params or {}).items():
            if name not in op.query_params:
                declared = ", ".join(sorted(op.query_params)) or "none"
                problems.append(
                    f"{where}: query parameter {name!r} is not in the spec (declared: {declared})"
                )
                continue
            problems += self._value_problems(where, f"query parameter {name}", value, op.query_params[name])
        if op.body_pointer is None:
            if body is not None:
                problems.append(f"{where}: sends a body, but the operation takes none")
        elif body is None:
            if op.body_required:
                problems.append(f"{where}: the operation requires a JSON body and none was sent")
        else:
            try:
                wire = json.dumps(body, sort_keys=True, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                problems.append(f"{where}: the body is not JSON: {exc}")
            else:
                problems += [f"{where}: body {line}" for line in self._body_problems(op.body_pointer, wire)]
        return problems

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one instance per process, never collected
    def _body_problems(self, pointer: str, wire: str) -> tuple[str, ...]:
        # Keyed on the body as sent: the bot syncs the same command tree and posts the same
        # cues again and again, and one sync alone takes tens of milliseconds to validate.
        # Validating the decoded text rather than the Python value also checks what Discord
        # would receive (a tuple arrives as an array).
        return tuple(self._errors(self._validator(pointer), json.loads(wire)))

    def _value_problems(self, where: str, what: str, raw: Any, pointer: str) -> list[str]:
        # aiohttp puts str, int and float in a URL as text and refuses anything else (a bool
        # included), so what is checked is that text, read the way Discord reads it.
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            return [f"{where}: {what} is {raw!r}, which aiohttp cannot put in a URL"]
        text = str(raw)
        value = _from_wire(text, self._lookup(pointer))
        return [f"{where}: {what} = {text!r}: {p}" for p in self._errors(self._validator(pointer), value)]

    @staticmethod
    def _errors(validator: Draft202012Validator, instance: Any) -> Iterator[str]:
        errors = list(validator.iter_errors(instance))
        if errors:
            # best_match descends into oneOf/anyOf to the branch that came closest, but stops
            # where branches tie ("... is not valid under any of the given schemas"); the deepest
            # error below it then usually names the real culprit, so it is shown too.
            error = best_match(errors)
            line = f"at {error.json_path}: {_shorten(error.message)}{_schema_path(error)}"
            leaf = _deepest(error)
            if leaf is not error:
                line += f"; deepest: at {leaf.json_path}: {_shorten(leaf.message)}"
            yield line

    def _lookup(self, pointer: str) -> Mapping[str, Any]:
        resolver = self._registry.resolver(BASE_URI)
        schema = resolver.lookup(f"#{pointer}").contents
        while "$ref" in schema:
            schema = resolver.lookup(schema["$ref"]).contents
        return schema


def _schema_path(error: ValidationError) -> str:
    schema_path = "/".join(str(p) for p in error.absolute_schema_path)
    return f" (schema {schema_path})" if schema_path else ""


def _deepest(error: ValidationError) -> ValidationError:
    deepest = error
    for child in error.context or ():
        leaf = _deepest(child)
        if len(leaf.absolute_path) > len(deepest.absolute_path):
            deepest = leaf
    return deepest


def _shorten(text: str, limit: int = 240) -> str:
    # A message quotes the offending value, which may be a whole embed.
    return text if len(text) <= limit else f"{text[: limit - 20]} ... {text[-15:]}"


def _escape(template: str) -> str:
    return template.replace("~", "~0").replace("/", "~1")


def _types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return set(kind)
    return {kind} if isinstance(kind, str) else set()


def _from_wire(text: str, schema: Mapping[str, Any]) -> Any:
    """A path or query value as the API reads it, for the types the schema allows; anything it
    cannot be read as is passed on as text, for the schema to refuse."""
    types = _types(schema)
    if "boolean" in types:
        if text in QUERY_TRUE:
            return True
        if text in QUERY_FALSE:
            return False
    if types & {"integer", "number"} and re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            pass
    return text


def normalise(document: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the spec with the two accepted conventions written in (the module docstring says
    which and why)."""
    doc = copy.deepcopy(dict(document))
    _walk(doc, property_name=None)
    return doc


def _walk(node: Any, property_name: str | None) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, None)
        return
    if not isinstance(node, dict):
        return
    for key, value in list(node.items()):
        if key == "properties" and isinstance(value, dict):
            for name, schema in value.items():
                _walk(schema, name)
        elif key not in ("examples", "example", "default", "const", "enum"):
            _walk(value, None)
    if _is_snowflake(node):
        original = dict(node)
        node.clear()
        node["anyOf"] = [original, {"type": "integer", "minimum": 0}]
    elif property_name in PERMISSION_FIELDS and "integer" in _types(node):
        original = dict(node)
        digits = len(str(node["maximum"])) if "maximum" in node else None
        as_text = {"type": "string", "pattern": "^(0|[1-9][0-9]*)$"}
        if digits is not None:
            as_text["maxLength"] = digits
        node.clear()
        node["anyOf"] = [original, as_text]


def _is_snowflake(node: Mapping[str, Any]) -> bool:
    return node.get("pattern") == SNOWFLAKE_PATTERN and "string" in _types(node)


@functools.cache
def spec() -> DiscordOpenAPI:
    """The vendored spec, loaded and indexed once per process."""
    with SPEC_PATH.open(encoding="utf-8") as fh:
        return DiscordOpenAPI(json.load(fh))
