"""Each interaction handled by exactly one bot process, when several share one token.

Discord delivers every interaction to every gateway session of the bot, and accepts only the
first answer: two processes that both acted on a GM's Confirm would have one of them tell the GM
"already confirmed". So before anything looks at an interaction, it is claimed by its id in the
database (``bridge.exclusive.ExternalClaims``, an ``INSERT IGNORE`` committed on its own). The
process whose insert added the row handles it; every other process says nothing at all, no
answer and no defer.

Where: discord.py's documented hooks, each of which asks ``InteractionGate.claimed`` first: the
command tree's ``interaction_check`` (slash commands and autocomplete, ``bot.tree``), every
button's ``DynamicItem.interaction_check`` (``bot.components.claimed_and_admitted``) and the
bot's ``on_interaction`` listener, which every interaction reaches, handled or not. The first
hook to ask starts the claim; the others await the same one, so each interaction is one insert.
A hook whose claim was lost (or failed) answers False, and discord.py runs no callback; no
command, autocomplete or button can act without it, and no discord.py internals are replaced.

Choices:

* **Autocomplete is claimed too.** Discord takes one answer to it, like any interaction; a
  second answer is an error in the loser's log, and its choices cost the loser database reads.
  One insert per keystroke is cheaper than both.
* **The database cannot be reached: act on nothing, and say so late.** The claim fails, so this
  process does not act. It answers the member that the database cannot be reached, as one
  process always did, but only ``UNCLAIMED_ANSWER_AFTER`` seconds later, inside Discord's 3 s:
  if the other process can reach the database it has claimed the interaction and answered it by
  then (its answer takes milliseconds), and Discord refuses this late one (it is logged), so a
  GM whose Confirm worked is never told it failed. Only when no process could claim it does the
  member read the short message. Autocomplete gets no such answer (it takes no message).
* **A press that needs what only one process holds** (the Publish and Cancel buttons of a
  ``/event publish`` preview, kept in the memory of the process that made it) is claimed at once
  by that process and only after ``DEFER_SECONDS`` by any other (``InteractionGate.elsewhere``),
  so the process holding the preview wins; if it is gone, the other answers that the preview
  expired, as after a restart.
* **Claims are kept an hour** (an interaction's token lives 15 minutes), pruned by the process
  that claims, at most every ``PRUNE_EVERY``, beside the interaction it claimed.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import discord

from bot.errors import DATABASE_DOWN, send_ephemeral
from bridge.exclusive import ExternalClaims
from runner.clock import Clock
from runner.db import DATABASE_ERRORS

log = logging.getLogger(__name__)

KEEP = dt.timedelta(hours=1)
PRUNE_EVERY = dt.timedelta(minutes=10)
# How long a process lacking what an interaction needs waits before claiming it.
DEFER_SECONDS = 0.5
# How long a process that could not claim an interaction waits before answering that the
# database cannot be reached: long after any process that claimed it has answered, well inside
# Discord's 3 s.
UNCLAIMED_ANSWER_AFTER = 2.0
# How many of the last claims' ids and timings are kept in memory (for status and tests); as many
# verdicts are kept for the hooks that ask after the first (they all ask within milliseconds).
RECENT = 1000


def claim_key(interaction_id: object) -> str:
    return f"interaction:{interaction_id}"


class InteractionGate:
    """This process's claims on interactions: ``claimed`` says whether to handle one."""

    def __init__(self, claims: ExternalClaims, clock: Clock) -> None:
        self.claims = claims
        self.clock = clock
        self.won = 0
        self.lost = 0
        self.failed = 0
        # The ids this process handled, and how long each claim took (seconds), latest last.
        self.handled: collections.deque[int] = collections.deque(maxlen=RECENT)
        self.claim_seconds: collections.deque[float] = collections.deque(maxlen=RECENT)
        self._pruned_at: dt.datetime | None = None
        self._unreachable = False
        # Each says whether an interaction (its ``data``) needs what another process holds.
        self.elsewhere: list[Callable[[Mapping[str, Any] | None], bool]] = []
        # The claim of each recent interaction, by id: the first hook starts it, the rest await it.
        self._verdicts: collections.OrderedDict[int, asyncio.Task[bool | None]] = collections.OrderedDict()
        # Answers to unclaimed interactions and prunes, running beside the handlers.
        self._chores: set[asyncio.Task[None]] = set()

    async def claimed(self, interaction: discord.Interaction) -> bool:
        """Whether this process handles ``interaction``: claimed once, however many hooks ask."""
        verdict = self._verdicts.get(interaction.id)
        if verdict is None:
            verdict = asyncio.create_task(self._claim(interaction), name=f"eventbot-claim-{interaction.id}")
            self._verdicts[interaction.id] = verdict
            while len(self._verdicts) > RECENT:
                self._verdicts.popitem(last=False)
        # Shielded: a hook given up on (its task cancelled) leaves the claim to the others.
        return bool(await asyncio.shield(verdict))

    async def _claim(self, interaction: discord.Interaction) -> bool | None:
        verdict = await self.admit(interaction.id, interaction.data)
        if verdict is None and interaction.type is not discord.InteractionType.autocomplete:
            self._beside(self._answer_unclaimed(interaction), f"eventbot-unclaimed-{interaction.id}")
        elif verdict:
            self._beside(self.housekeeping(), "eventbot-claims-prune")
        return verdict

    def _beside(self, chore: Any, name: str) -> None:
        task = asyncio.create_task(chore, name=name)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def admit(self, interaction_id: int, data: Mapping[str, Any] | None) -> bool | None:
        """Claim the interaction ``interaction_id`` (``data``: its payload's data): True when this
        process won, False when another did, None when it could not be claimed (the database)."""
        if any(check(data) for check in self.elsewhere):
            await asyncio.sleep(DEFER_SECONDS)
        started = time.perf_counter()
        try:
            mine = await self.claims.claim(claim_key(interaction_id), self.clock.now())
        except DATABASE_ERRORS as exc:
            self.failed += 1
            if not self._unreachable:
                log.warning(
                    "interaction %s not handled: the database cannot be reached: %s", interaction_id, exc
                )
            self._unreachable = True
            return None
        except Exception:
            self.failed += 1
            log.exception("interaction %s not handled: its claim failed", interaction_id)
            return None
        self._unreachable = False
        self.claim_seconds.append(time.perf_counter() - started)
        if not mine:
            self.lost += 1
            log.debug("interaction %s is handled by another process", interaction_id)
            return False
        self.won += 1
        self.handled.append(int(interaction_id))
        return True

    async def _answer_unclaimed(self, interaction: discord.Interaction) -> None:
        """Tell the member the database cannot be reached, unless another process answered: the
        acknowledgement goes first (``UNCLAIMED_ANSWER_AFTER`` late), and Discord refuses it if
        the interaction was answered, in which case nothing more is sent (a follow-up would
        reach the member whoever answered)."""
        await asyncio.sleep(UNCLAIMED_ANSWER_AFTER)
        thinking = interaction.type is discord.InteractionType.application_command
        try:
            await interaction.response.defer(ephemeral=True, thinking=thinking)
        except discord.HTTPException as exc:
            log.info("interaction %s was answered by another process (%s)", interaction.id, exc.status)
            return
        await send_ephemeral(interaction, DATABASE_DOWN)

    async def housekeeping(self) -> None:
        """Prune old claims, at most every ``PRUNE_EVERY``; never raises."""
        now = self.clock.now()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        try:
            await self.claims.prune(now - KEEP)
        except Exception as exc:
            log.warning("could not prune old interaction claims: %s", exc)
