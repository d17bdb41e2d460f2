"""Virtual time for the serving loop: an injected ``sleep`` that returns only when the test moves
time past its end, and a ``monotonic`` that reads the same virtual seconds.

A test drives the loop step by step (``await time.asleep(n)``: the loop has gone to sleep for the
n-th time; ``await time.advance(s)``: s seconds pass) and asserts on exactly what it asked for,
``time.sleeps``, instead of polling the wall clock with a bound.
"""

from __future__ import annotations

import asyncio

from runner.clock import ManualClock

# Wall-clock seconds before a wait for the loop is called a hang: only a broken loop waits this
# long, and the test then fails instead of blocking the suite.
HANG = 10.0


class VirtualTime:
    def __init__(self, clock: ManualClock | None = None) -> None:
        # The runner's clock moves with virtual time, so due steps fall due as it passes.
        self.clock = clock
        self.elapsed = 0.0
        self.sleeps: list[float] = []
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self._slept = asyncio.Event()

    def monotonic(self) -> float:
        return self.elapsed

    @property
    def pending(self) -> int:
        """Sleeps begun and not yet over (nor cancelled)."""
        return len(self._sleepers)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.elapsed + seconds, wake))
        self._slept.set()
        try:
            await wake
        finally:
            self._sleepers = [(at, f) for at, f in self._sleepers if f is not wake]

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass: the clock moves and every sleep that ends by then returns."""
        self.elapsed += seconds
        if self.clock is not None:
            self.clock.advance(seconds)
        for at, wake in self._sleepers:
            if at <= self.elapsed and not wake.done():
                wake.set_result(None)
        await asyncio.sleep(0)

    async def asleep(self, count: int) -> None:
        """Return once the loop has gone to sleep ``count`` times in all (it is asleep now)."""
        async with asyncio.timeout(HANG):
            while len(self.sleeps) < count:
                self._slept.clear()
                await self._slept.wait()
