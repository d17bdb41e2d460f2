"""Placeholders in the text of an event, filled in per run when a step is delivered:
``{scope}`` (the run's scope), ``{title}`` (the event's title), ``{start}`` and
``{start_relative}`` (when the occurrence starts, as the front end shows a time: on Discord a
timestamp each reader sees in their own zone), ``{attendees}`` (the members with a seat on the
run's sign-up, as mentions) and ``{attendee_count}`` (how many).

The rule, one for validation and for rendering alike:

* ``{name}``, a name of ASCII letters, digits and ``_`` (not starting with a digit), is a
  placeholder. Only the names in ``KNOWN`` exist; any other is refused when the definition is
  validated, so a typo such as ``{scop}`` never reaches players as it was typed.
* ``{{`` and ``}}`` stand for a literal ``{`` and ``}``: ``{{scope}}`` shows ``{scope}``.
* Any other brace is text as it stands (``:-}``, ``{1}``, ``{see the rules}``), except a near
  miss of a known placeholder (``{ scope }``, ``{scope:upper}``, ``{Scope!r}``), which is
  refused as the typo it almost certainly is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from runner.suggestions import closest

KNOWN = ("scope", "title", "start", "start_relative", "attendees", "attendee_count")
# Filled from the run's sign-up (``runner.signups``): an event without ``signup:`` may not use them.
SIGNUP_PLACEHOLDERS = ("attendees", "attendee_count")

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}", re.ASCII)
_BRACED = re.compile(r"\{([^{}]*)\}")
_LEADING_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)", re.ASCII)


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each known placeholder replaced and ``{{`` / ``}}`` unescaped. A name not in
    ``values`` stays as written (validation refuses it; a version stored before that rule still
    renders rather than fails)."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        return values[name] if name in values else token

    return _TOKEN.sub(one, text)


def problem(text: str, known: tuple[str, ...] = KNOWN) -> str | None:
    """Why ``text`` cannot be rendered as meant, or ``None``: every unknown placeholder named,
    with a "did you mean" when one of the known ones is close."""
    unknown: list[str] = []
    for match in _TOKEN.finditer(text):
        name = match.group(1)
        if name is not None and name not in known and name not in unknown:
            unknown.append(name)
    near: list[tuple[str, str]] = []
    for match in _BRACED.finditer(_TOKEN.sub(_blank_escapes, text)):
        leading = _LEADING_NAME.match(match.group(1))
        meant = closest(leading.group(1), known) if leading else None
        if meant is not None and match.group(0) != f"{{{meant}}}":
            near.append((match.group(0), meant))
    if not unknown and not near:
        return None
    parts = [f"{{{name}}}{_suggestion(name, known)}" for name in unknown]
    parts += [f"{shown} (write it as {{{meant}}}, exactly)" for shown, meant in near]
    listed = ", ".join(f"{{{name}}}" for name in known)
    noun = "placeholder" if len(parts) == 1 else "placeholders"
    return (
        f"unknown {noun} {'; '.join(parts)}. The placeholders are {listed}; "
        "write {{ and }} for a literal { or }"
    )


def _blank_escapes(match: re.Match[str]) -> str:
    # Escaped braces and well-formed placeholders are dealt with; blank them so only the
    # braces left over are looked at for near misses.
    return " " * len(match.group(0))


def _suggestion(name: str, known: tuple[str, ...]) -> str:
    meant = closest(name, known)
    return f" (did you mean {{{meant}}}?)" if meant else ""
