"""Desired against recorded: the one comparison behind every reconciler of Discord state.

The event thread's members and the attendee role's holders are each a set the seats decide
(desired) and a set the bot recorded asking Discord for (recorded). What to ask for next is the
difference both ways: the desired not recorded (in the desired order, which is click order), and
the recorded no longer desired (sorted, so two processes go through them alike).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

T = TypeVar("T", bound="SupportsRichComparison")


@dataclass(frozen=True)
class Difference(Generic[T]):
    add: list[T]
    remove: list[T]


def difference(desired: Iterable[T], recorded: Collection[T]) -> Difference[T]:
    wanted = list(dict.fromkeys(desired))
    kept = set(wanted)
    return Difference(
        add=[item for item in wanted if item not in recorded],
        remove=sorted(item for item in recorded if item not in kept),
    )
