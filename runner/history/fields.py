"""How a run-log event's fields are stored: each field's key and codec, worked out from its
annotation once per class (kept apart from ``events`` so that module holds the kinds alone)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ── Field codecs ──────────────────────────────────────────────────────────
# Worked out from each field's annotation, once per class: a datetime is stored as an ISO
# string, an enum as its value; a trailing underscore is dropped from the stored key (``from``
# is a keyword); a field whose default is ``None`` is left out while unset.

_Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]


@dataclass(frozen=True)
class _Field:
    name: str
    key: str
    omit_none: bool
    required: bool
    codec: _Codec | None


def _codec_for(hint: Any) -> _Codec | None:
    for each in typing.get_args(hint) or (hint,):
        if each is dt.datetime:
            return (lambda v: v.isoformat(), dt.datetime.fromisoformat)
        if isinstance(each, type) and issubclass(each, enum.StrEnum):
            return (str, each)
    return None


_FIELDS: dict[type[Any], tuple[_Field, ...]] = {}


def fields_of(cls: type[Any]) -> tuple[_Field, ...]:
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    known = _FIELDS[cls] = tuple(
        _Field(
            name=f.name,
            key=f.name.rstrip("_"),
            omit_none=f.default is None,
            required=f.default is dataclasses.MISSING,
            codec=_codec_for(hints[f.name]),
        )
        for f in dataclasses.fields(cls)
    )
    return known
