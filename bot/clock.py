"""The bot's clock: Discord's idea of "now", as the naive UTC the runner stores.

``discord.utils.utcnow()`` is the system clock in production; in the simulated Discord of the
tests it is the simulation's clock, so ``env.advance_time`` moves the runner, the ``ext.tasks``
loops and the timestamps in messages together.
"""

from __future__ import annotations

import datetime as dt

import discord


class DiscordClock:
    def now(self) -> dt.datetime:
        return discord.utils.utcnow().replace(tzinfo=None)


def as_utc(moment: dt.datetime) -> dt.datetime:
    """A naive-UTC instant from the runner as an aware one, for Discord timestamps."""
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment
