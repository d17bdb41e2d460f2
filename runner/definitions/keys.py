"""The key of an event or a phase: how staff refer to it (``/event start shadow-invasion``), and
the rule an author is told in words, never as the pattern."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

KEY = r"^[a-z0-9][a-z0-9_-]{0,63}$"
KEY_MAX = 64
KEY_RULE = (
    f"lower case letters, digits, - and _, starting with a letter or a digit, at most {KEY_MAX} characters"
)
_KEY = re.compile(KEY.removeprefix("^").removesuffix("$"), re.ASCII)
_KEY_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "-_")


def key_problem(value: str) -> str | None:
    """Why ``value`` is not a key (``KEY``), in words, or ``None``. Matched in full, as the
    pattern means it (Python's ``$`` would let a trailing newline through)."""
    if _KEY.fullmatch(value):
        return None
    if not value:
        return f"must not be empty: a key is {KEY_RULE}"
    shown = repr(value if len(value) <= 40 else value[:40] + "…")
    odd = [c for c in dict.fromkeys(value) if c not in _KEY_CHARACTERS]
    if len(value) > KEY_MAX:
        why = f"it is {len(value)} characters"
    elif odd and all(c.isupper() for c in odd):
        why = "it has upper case letters"
    elif odd:
        why = f"it has {', '.join(repr(c) for c in odd[:5])}"
    else:
        why = f"it starts with {value[0]!r}"
    return f"{shown} is not a key ({why}): use {KEY_RULE}"


def checked_key(value: str) -> str:
    """A field validator's: ``value`` if it is a key, else ``ValueError`` in words."""
    problem = key_problem(value)
    if problem:
        raise ValueError(problem)
    return value


T = TypeVar("T", bound=Hashable)


def repeated(values: Iterable[T], folded: Sequence[Hashable] | None = None) -> list[T]:
    """The values listed more than once (compared as ``folded``, when given), in one pass: a
    definition's lists are checked for repeats before their limits, and an upload may hold tens
    of thousands of entries, where ``list.count`` in a loop took seconds."""
    items = list(values)
    keys = list(folded) if folded is not None else items
    seen = Counter(keys)
    return sorted({v for v, k in zip(items, keys, strict=True) if seen[k] > 1}, key=str)
