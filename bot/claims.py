"""Each interaction handled by exactly one bot process, when several share one token.

Discord delivers every interaction to every gateway session of the bot, and accepts only the
first answer: two processes that both acted on a GM's Confirm would have one of them tell the GM
"already confirmed". So before anything looks at an interaction, it is claimed by its id in the
database (``bridge.exclusive.ExternalClaims``, an ``INSERT IGNORE`` committed on its own). The
process whose insert added the row handles it; every other process says nothing at all, no
answer and no defer.

Where: ``ClaimingState.parse_interaction_create``, the one place every interaction enters
discord.py (the gateway's ``INTERACTION_CREATE`` parser, which hands slash commands and
autocomplete to the command tree, buttons and selects to the view store, modals to theirs). The
claim runs there in a task, and only a won claim continues into discord.py's own parser, so no
command, autocomplete, button, modal or ``on_interaction`` listener can be reached without it.

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
  that claims, at most every ``PRUNE_EVERY``, after the interaction it claimed is dispatched.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

import discord
from discord.state import ConnectionState

from bot.errors import DATABASE_DOWN, send_ephemeral
from bridge.exclusive import ExternalClaims
from runner.clock import Clock
from runner.db import DATABASE_ERRORS

log = logging.getLogger(__name__)

COMMAND, AUTOCOMPLETE = 2, 4
KEEP = dt.timedelta(hours=1)
PRUNE_EVERY = dt.timedelta(minutes=10)
# How long a process lacking what an interaction needs waits before claiming it.
DEFER_SECONDS = 0.5
# How long a process that could not claim an interaction waits before answering that the
# database cannot be reached: long after any process that claimed it has answered, well inside
# Discord's 3 s.
UNCLAIMED_ANSWER_AFTER = 2.0
# How many of the last claims' ids and timings are kept in memory (for status and tests).
RECENT = 1000


def claim_key(interaction_id: object) -> str:
    return f"interaction:{interaction_id}"


class InteractionGate:
    """This process's claims on interactions: ``admit`` says whether to handle one."""

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
        # Each says whether an interaction (its gateway payload) needs what another process holds.
        self.elsewhere: list[Callable[[Any], bool]] = []

    async def admit(self, data: Any) -> bool | None:
        """Claim the interaction in ``data`` (the gateway payload): True when this process won,
        False when another did, None when it could not be claimed (the database)."""
        interaction_id = data.get("id")
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


class ClaimingState(ConnectionState):  # type: ignore[type-arg]
    """discord.py's connection state, with every interaction claimed before it is parsed.

    ``gate`` is set by the bot once it is built (the state is made inside ``Client.__init__``,
    before the bot has a database); without one, interactions pass as discord.py's own would."""

    gate: InteractionGate | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claiming: set[asyncio.Task[None]] = set()

    def parse_interaction_create(self, data: Any) -> None:
        gate = self.gate
        if gate is None:
            super().parse_interaction_create(data)
            return
        task = asyncio.create_task(self._claimed(gate, data), name=f"eventbot-claim-{data.get('id')}")
        self._claiming.add(task)
        task.add_done_callback(self._claiming.discard)

    async def _answer_unclaimed(self, data: Any) -> None:
        """Tell the member the database cannot be reached, unless another process answered: the
        acknowledgement goes first, and Discord refuses it if the interaction was answered, in
        which case nothing more is sent (a follow-up would reach the member whoever answered)."""
        interaction = discord.Interaction(data=data, state=self)
        try:
            await interaction.response.defer(ephemeral=True, thinking=data.get("type") == COMMAND)
        except discord.HTTPException as exc:
            log.info("interaction %s was answered by another process (%s)", data.get("id"), exc.status)
            return
        await send_ephemeral(interaction, DATABASE_DOWN)

    async def _claimed(self, gate: InteractionGate, data: Any) -> None:
        verdict = await gate.admit(data)
        if verdict is None and data.get("type") != AUTOCOMPLETE:
            await asyncio.sleep(UNCLAIMED_ANSWER_AFTER)
            await self._answer_unclaimed(data)
        if not verdict:
            return
        try:
            super().parse_interaction_create(data)
        except Exception:
            # What discord.py's gateway would have done with a parser's error: log it.
            log.exception("interaction %s: discord.py could not parse it", data.get("id"))
        await gate.housekeeping()


def gate_of(client: discord.Client) -> InteractionGate | None:
    state = getattr(client, "_connection", None)
    return getattr(state, "gate", None)
