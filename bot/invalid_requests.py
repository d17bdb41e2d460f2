"""Discord's invalid-request limit, kept far away: Cloudflare bans the bot's IP for an hour when
10,000 requests in 10 minutes are answered 401, 403 or 429 (Discord's rate-limit docs, "Invalid
Request Limit"). One refusal repeated by a loop every pass, for a few hundred objects, gets
there; the loops stop asking on an answer that is final for its object, and this guard is the
net under them: every 401, 403 and 429 the process receives is counted over a sliding 10
minutes, and past ``budget`` (1,000 by default, a tenth of Discord's) the background loops (the
sign-up messages, roles, threads, the Events tab, the live messages) skip their passes until the
count is back under half the budget. The tick still sends what runs announce: that is the
product, and its failures are retried with their own backoff. ``/event health`` and the staff
log say when it trips and when it clears.

Why a wrapper on ``HTTPClient.request`` and not discord.py's public ``http_trace``: the trace is
an aiohttp hook, and the bot's tests run on a simulated Discord with no aiohttp underneath, so
the guard would be untestable through the real bot. The wrapper sees what discord.py raises:
every 401 and 403, and a 429 that discord.py gave up waiting on; the 429s discord.py waits out
itself are counted by the trace (``trace_config``), where there is an aiohttp session.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import aiohttp
import discord

log = logging.getLogger(__name__)

WINDOW_SECONDS = 600.0
DEFAULT_BUDGET = 1000
# What Discord counts against the IP.
INVALID = frozenset({401, 403, 429})


class InvalidRequests:
    def __init__(self, budget: int = DEFAULT_BUDGET, now: Callable[[], float] | None = None) -> None:
        self.budget = budget
        self._now = now or (lambda: asyncio.get_running_loop().time())
        self._answers: deque[float] = deque()
        self._backing_off = False
        self.total = 0
        # Told ``True`` when the guard trips and ``False`` when it clears (the staff log).
        self.on_change: Callable[[bool], None] | None = None

    def record(self, status: int) -> None:
        if status in INVALID:
            self._answers.append(self._now())
            self.total += 1
            self._update()

    def count(self) -> int:
        """Invalid answers in the last 10 minutes."""
        horizon = self._now() - WINDOW_SECONDS
        while self._answers and self._answers[0] <= horizon:
            self._answers.popleft()
        return len(self._answers)

    @property
    def backing_off(self) -> bool:
        self._update()
        return self._backing_off

    def _update(self) -> None:
        count = self.count()
        was = self._backing_off
        if not was and count >= self.budget:
            self._backing_off = True
        elif was and count < self.budget // 2:
            self._backing_off = False
        if was != self._backing_off:
            if self._backing_off:
                log.warning("Discord refused %d requests in 10 minutes: background work pauses", count)
            else:
                log.info("invalid requests back to %d in 10 minutes: background work resumes", count)
            if self.on_change is not None:
                self.on_change(self._backing_off)

    def summary(self) -> str | None:
        """A line for ``/event health`` when there is anything to say."""
        count = self.count()
        if self._backing_off:
            return (
                f"Discord refused {count} requests in the last 10 minutes (401, 403 or 429; the bot's "
                f"budget is {self.budget}, Discord bans the IP at 10,000): background work is paused "
                f"until fewer than {self.budget // 2}"
            )
        if count >= self.budget // 4:
            return f"Discord refused {count} requests in the last 10 minutes (budget {self.budget})"
        return None

    def watch(self, http: discord.http.HTTPClient) -> None:
        """Count what every REST request through ``http`` is refused with."""
        request = http.request

        async def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                return await request(*args, **kwargs)
            except discord.HTTPException as exc:
                self.record(exc.status)
                raise

        http.request = counted  # type: ignore[method-assign]

    def trace_config(self) -> aiohttp.TraceConfig:
        """The 429s discord.py waits out by itself, seen where they arrive (a real session)."""
        trace = aiohttp.TraceConfig()

        async def on_request_end(_session: Any, _context: Any, params: aiohttp.TraceRequestEndParams) -> None:
            if params.response.status == 429:
                self.record(429)

        trace.on_request_end.append(on_request_end)
        return trace
