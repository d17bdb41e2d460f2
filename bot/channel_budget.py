"""Discord's per-channel budget, shared by everything the bot sends to one channel.

Discord lets a bot send about 5 messages per 5 seconds to a channel and answers more with a 429.
discord.py waits out a 429 on its own, but the bot can do better than being told off: the staff
channel is written by the staff log and the live run messages at once, and a burst in one (50 runs
moving) must not starve the other or earn the bot a rate limit. So every send or edit to a staff
channel takes a slot here first; a part of the bot that can coalesce (the live messages) asks
``free`` before it spends a slot on an edit that a later one would replace.

Time is the event loop's clock, so a test's virtual time (simcord) drives it like a real one.

Kept rather than replaced, because neither library holds the same promise (never more than 5
requests in any 5 s, sends and edits together, taken in the order asked): aiolimiter is a leaky
bucket, which after a burst of 5 lets one more through each second (6 within the window), and
discord.py's limiter learns a bucket from Discord's answers, one per route (a send and an edit
apart), with no way to ask what is ``free`` without spending it.
"""

from __future__ import annotations

import asyncio
from collections import deque

# Discord's published per-channel limit for bots (messages per window).
MESSAGES_PER_WINDOW = 5
WINDOW_SECONDS = 5.0


class ChannelBudget:
    def __init__(self, *, messages: int = MESSAGES_PER_WINDOW, window: float = WINDOW_SECONDS) -> None:
        self.messages = messages
        self.window = window
        self._spent: dict[int, deque[float]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def _recent(self, channel_id: int, now: float) -> deque[float]:
        spent = self._spent.setdefault(channel_id, deque())
        while spent and now - spent[0] >= self.window:
            spent.popleft()
        return spent

    def free(self, channel_id: int) -> int:
        """Slots this channel has now, without waiting."""
        now = asyncio.get_running_loop().time()
        return self.messages - len(self._recent(channel_id, now))

    async def take(self, channel_id: int) -> None:
        """Wait until the channel has a slot, and spend it. Callers take slots in the order they
        asked (one lock per channel), so a steady sender cannot starve another."""
        lock = self._locks.setdefault(channel_id, asyncio.Lock())
        loop = asyncio.get_running_loop()
        async with lock:
            while True:
                now = loop.time()
                spent = self._recent(channel_id, now)
                if len(spent) < self.messages:
                    spent.append(now)
                    return
                await asyncio.sleep(self.window - (now - spent[0]))
