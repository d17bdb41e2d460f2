"""Reading YAML that people wrote (event definitions, the config) into plain data.

``yaml.safe_load`` lets a few inputs escape as bare Python errors with no place in the file: bytes
that are not UTF-8 (``UnicodeDecodeError``), a timestamp whose offset is 24 h or more or whose
date does not exist (``ValueError`` from ``datetime``), an integer longer than Python's 4,300-digit
conversion limit, an explicit tag on a value it cannot hold (``!!int "zz"``), an escape past the
last Unicode character (``"\\U00110000"``), and nesting deep enough to exhaust the recursion
limit (or, as a long run of brackets, to take PyYAML's scanner minutes). Every one of them becomes a ``YamlError`` here, whose
message is one line that names the line and column, so every caller reports a bad file the
same way and none of them shows a traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

# Far deeper than any config or definition needs, and far below what exhausts Python's stack
# (PyYAML's composer recurses once per level).
MAX_DEPTH = 100
# PyYAML's scanner reads a whole run of "[" / "{" before the composer sees the first level, and
# in time quadratic in its length (1,000 take 0.3 s, 100,000 would take most of an hour). So
# brackets are counted first, naively (in quotes and comments too), against twice MAX_DEPTH:
# only text far past any real nesting is refused unread, and parsing the rest stays quick.
MAX_BRACKET_DEPTH = 2 * MAX_DEPTH
# Values (every key, item and alias) read from one text. PyYAML takes 20 to 40 microseconds a
# value, so 256 KB of brackets or one-letter entries (over 100,000 of them) took 5 s to read;
# this stops it at about one. It is far above any config or definition (a definition may hold
# 10,000 values, ``runner.limits.MAX_VALUES``), and above the 37,406 names of issue 26's upload,
# so a list that long is still refused by its own limit, in the definition's words.
MAX_NODES = 40_000


class YamlError(ValueError):
    """The text could not be read as YAML; ``str()`` is one line naming where."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.line = line
        self.column = column
        super().__init__(message)


class _Loader(yaml.SafeLoader):
    """``SafeLoader`` whose value errors and depth are located like its syntax errors."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
            if self._nodes > MAX_NODES:
                mark = self.peek_event().start_mark
                raise ComposerError(
                    None, None, f"more than {MAX_NODES} values: far more than any file needs", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, AttributeError, OverflowError, LookupError) as exc:
            raise ConstructorError(None, None, _explain(node, exc), node.start_mark) from None


def _explain(node: Any, exc: Exception) -> str:
    text = str(exc)
    if "Exceeds the limit" in text and "digits" in text:
        return "a number of more than 4,300 digits is too long to read"
    if "offset must be a timedelta" in text:
        return "a time zone offset must be less than 24 hours (e.g. +01:00)"
    tag = str(getattr(node, "tag", "")).rsplit(":", 1)[-1] or "YAML"
    if tag == "timestamp":
        # datetime's own reasons ("month must be in 1..12") speak to the person who wrote it.
        why = f" ({text})" if isinstance(exc, ValueError) and text else ""
        return f"not a valid date or time{why}"
    # int()'s and float()'s ("invalid literal for int() with base 10") are Python's internals.
    value = getattr(node, "value", None)
    shown = f"{value[:40]!r} " if isinstance(value, str) else ""
    return f"cannot read this value {shown}as {_TAG_WORDS.get(tag, tag)} (!!{tag})"


_TAG_WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false"}
# PyYAML's words for what authors most often get wrong, in theirs.
_PLAIN_SYNTAX = {
    "found character '\\t' that cannot start any token": "a tab: YAML indents with spaces only",
    # A value holding ": " (``content: Note: bring snacks``), or a key indented one space too far.
    "mapping values are not allowed here": (
        "mapping values are not allowed here: text with ': ' in it must be in quotes "
        '(content: "Note: bring snacks"), and a key must line up with the keys above it'
    ),
}


# A # after a space inside { } or [ ] opened on the same line: ``{channel: #announcements, ...}``
# makes the rest of the line a comment, and PyYAML then reports the unclosed bracket at the end
# of the file, far from the #.
_COMMENT_IN_BRACKETS = re.compile(r"[{\[][^\n#}\]]*\s#")


def _hidden_by_a_comment(text: str) -> str:
    found = _COMMENT_IN_BRACKETS.search(text)
    if found is None:
        return ""
    line = text.count("\n", 0, found.start()) + 1
    return (
        f" (line {line}: a # after a space starts a YAML comment, so the rest of that line was not "
        "read: write '#name' in quotes, or leave the # out)"
    )


def _plain_problem(problem: str) -> str:
    if problem.startswith("could not determine a constructor for the tag "):
        tag = problem.rsplit("'", 2)[-2] if problem.count("'") >= 2 else ""
        tag = tag.replace("tag:yaml.org,2002:", "!!")
        return (
            f"the tag {tag} is not allowed here: write plain values (text, numbers, true/false, "
            "lists and mappings)"
        )
    return _PLAIN_SYNTAX.get(problem, problem)


def _located(message: str, mark: Any) -> YamlError:
    if mark is None:
        return YamlError(message)
    return YamlError(
        f"line {mark.line + 1}, column {mark.column + 1}: {message}", mark.line + 1, mark.column + 1
    )


def _line_and_column(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _check_brackets(text: str) -> None:
    if text.count("[") + text.count("{") <= MAX_BRACKET_DEPTH:
        return
    depth = 0
    for position, character in enumerate(text):
        if character in "[{":
            depth += 1
            if depth > MAX_BRACKET_DEPTH:
                line, column = _line_and_column(text, position)
                raise YamlError(
                    f"line {line}, column {column}: nested more than {MAX_DEPTH} levels deep", line, column
                )
        elif character in "]}" and depth:
            depth -= 1


def parse(text: str) -> Any:
    """The data in ``text``, or ``YamlError``."""
    _check_brackets(text)
    loader: _Loader | None = None
    try:
        # The reader checks every character as it is built, so building it is inside the try.
        loader = _Loader(text)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        problem = _plain_problem(exc.problem or "this is not valid YAML")
        if isinstance(exc, ComposerError) and exc.context:
            raise _located(f"{exc.context}, {problem}", exc.problem_mark) from None
        if isinstance(exc, ConstructorError | ComposerError) and exc.context is None:
            raise _located(problem, exc.problem_mark) from None
        raise _located(
            f"YAML syntax error: {problem}{_hidden_by_a_comment(text)}", exc.problem_mark
        ) from None
    except yaml.reader.ReaderError as exc:
        line, column = _line_and_column(text, exc.position)
        what = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        raise YamlError(
            f"line {line}, column {column}: the character {what} is not allowed in YAML", line, column
        ) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise YamlError(f"nested too deeply to read (at most {MAX_DEPTH} levels)") from None
    except (ValueError, OverflowError) as exc:
        # The scanner's own: a double-quoted "\U00110000" reaches chr() with no character to give.
        mark = loader.get_mark() if loader is not None else None
        escape = isinstance(exc, OverflowError) or "chr()" in str(exc)
        why = "an escape that names no Unicode character" if escape else str(exc)
        raise _located(f"cannot read this text: {why}", mark) from None
    finally:
        if loader is not None:
            loader.dispose()


def decode(data: bytes) -> str:
    """UTF-8 (a byte-order mark allowed), or ``YamlError`` naming the first byte that is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise YamlError(
            f"line {line}, column {column}: the file is not UTF-8 text (byte 0x{data[exc.start]:02x}); "
            "save it as UTF-8",
            line,
            column,
        ) from None


def read(path: str | Path) -> Any:
    """The data in the file at ``path``: ``OSError`` if it cannot be read, else as ``parse``."""
    return parse(decode(Path(path).read_bytes()))
