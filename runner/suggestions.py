"""Where "did you mean" comes from: the one place that picks, from the names that exist, the
one a person most likely meant when they wrote a name that does not (a field, an action, a
channel or role alias, a placeholder). Every message that offers a correction asks here, so they
all agree on what is close enough to offer."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# difflib's own default: close enough that a suggestion is a likely typo, far enough that an
# unrelated name is not offered ("colour" for "color", not "title" for "size").
CUTOFF = 0.6


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely meant, or ``None``: a difference in letter case
    alone first, else the nearest by ``difflib``."""
    names = list(dict.fromkeys(known))
    folded = {k.casefold(): k for k in names}
    if name.casefold() in folded:
        return folded[name.casefold()]
    close = difflib.get_close_matches(name, names, n=1, cutoff=CUTOFF)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'colour'?"`` when a known name is close, else ``""``: to append to a
    message that has named what was written."""
    meant = closest(name, known)
    return f"; did you mean {meant!r}?" if meant is not None and meant != name else ""
