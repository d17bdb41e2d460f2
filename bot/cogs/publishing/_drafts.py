"""The definitions ``/event publish`` has previewed and not yet published: each waits here for its
Publish or Cancel press, in this process's memory, keyed by the random token its buttons carry.

In memory on purpose: a preview is a question asked of one member for a few minutes, and
nothing about it needs to outlive the process (after a restart its buttons answer that the
preview expired, and nothing was published). Each bot holds its own ``Drafts`` (``EventBot``
builds one), so two bots in one test share nothing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.custom_ids import PublishPress, parse
from runner.definitions import EventDefinition

# How long a preview's buttons work: long enough to read the changes, short enough that the
# version it was compared with is still likely to be the current one.
DRAFT_SECONDS = 15 * 60
# A draft holds a whole definition (up to the upload limit): at most this many are kept, the
# oldest forgotten first.
MAX_DRAFTS = 50
TOKEN_BYTES = 8


@dataclass(frozen=True)
class Draft:
    token: str
    # The member who asked: the only one whose press counts.
    user_id: int
    definition: EventDefinition
    # Where it came from, as the version's ``source`` records it.
    source: str
    # The version the preview was compared with (``None``: the event was not published yet).
    base_version_id: int | None
    # The version number it would become, as the preview says.
    number: int
    expires_at: dt.datetime


class Drafts:
    def __init__(self) -> None:
        self._by_token: dict[str, Draft] = {}
        # Held from the check that the event has not moved on to the publish itself, so two
        # presses in this process (two members' previews of one version) cannot both pass the
        # check before either has published.
        self.publishing = asyncio.Lock()

    def add(
        self,
        *,
        user_id: int,
        definition: EventDefinition,
        source: str,
        base_version_id: int | None,
        number: int,
        now: dt.datetime,
    ) -> Draft:
        self._forget_expired(now)
        while len(self._by_token) >= MAX_DRAFTS:
            del self._by_token[next(iter(self._by_token))]
        draft = Draft(
            token=secrets.token_hex(TOKEN_BYTES),
            user_id=user_id,
            definition=definition,
            source=source,
            base_version_id=base_version_id,
            number=number,
            expires_at=now + dt.timedelta(seconds=DRAFT_SECONDS),
        )
        self._by_token[draft.token] = draft
        return draft

    def get(self, token: str, now: dt.datetime) -> Draft | None:
        """The draft, unless it expired or was published, cancelled or forgotten."""
        self._forget_expired(now)
        return self._by_token.get(token)

    def take(self, token: str) -> Draft | None:
        """The draft, removed: whatever a press does with it, it is done once."""
        return self._by_token.pop(token, None)

    def elsewhere(self, data: Mapping[str, Any] | None) -> bool:
        """Whether an interaction (its payload's ``data``) presses a preview this process does
        not hold: another process made it (``bot.claims`` lets that one claim the press first)."""
        press = parse(str((data or {}).get("custom_id") or ""))
        return isinstance(press, PublishPress) and press.token not in self._by_token

    def _forget_expired(self, now: dt.datetime) -> None:
        for token in [t for t, d in self._by_token.items() if d.expires_at <= now]:
            del self._by_token[token]
