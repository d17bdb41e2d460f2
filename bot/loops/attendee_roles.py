"""Gives an event's ``attendee_role`` to its confirmed attendees and takes it back.

The reconcile of ``runner.attendee_roles``, in a loop of its own (nudged after every tick) held
by one process (the ``attendee-roles`` lease): each pass asks what to add and what to remove,
and sends ``PUT`` / ``DELETE /guilds/{g}/members/{u}/roles/{r}``, recording each once Discord
has accepted it. Both requests are idempotent at Discord, so one repeated after a crash between
the answer and the record is harmless. A member who left the server (10007) needs no removal
and can get no grant: recorded as done. A refusal (no Manage Roles, the role above the bot's)
is logged once and tried again a minute later; preflight and ``/event health`` name it beforehand.

The bot only takes back what it gave: a grant it has no record of (staff gave the role by hand)
is never removed. A member who already held the role before confirming loses it at the end,
since the bot cannot tell it was theirs first without the members intent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import discord

from bot.errors import DATABASE_ERRORS
from bot.loops.ticker import WakeableLoop
from runner import attendee_roles
from runner.attendee_roles import Grant

if TYPE_CHECKING:
    from bot.app import EventBot

log = logging.getLogger(__name__)

UNKNOWN_MEMBER = 10007
REASON = "event attendee"
# After a refusal, that grant is not asked for again for this long: a refusal repeated every
# pass would count against Discord's limit on invalid requests.
RETRY_SECONDS = 60.0


class AttendeeRoles:
    def __init__(self, bot: EventBot, *, interval: float) -> None:
        self.bot = bot
        self.lease = bot.lease_for("attendee-roles")
        self.granted = 0
        self.removed = 0
        self._reported: set[tuple[Grant, str]] = set()
        # Loop time before which a refused grant (or removal) is not tried again.
        self._not_before: dict[tuple[Grant, bool], float] = {}
        self.loop = WakeableLoop(
            self.pass_once, interval=interval, name="eventbot-attendee-roles", before=self._ready
        )

    async def _ready(self) -> None:
        await self.bot.wait_until_ready()

    def start(self) -> None:
        self.loop.start()

    def cancel(self) -> None:
        self.loop.cancel()

    def nudge(self) -> None:
        self.loop.nudge()

    async def pass_once(self) -> float:
        """One pass (never raises)."""
        interval = self.loop.interval
        guild_id = self.bot.config.guild_id
        if guild_id is None or self.bot.get_guild(guild_id) is None:
            return interval  # not this process's guild
        if await self.lease.take() is None:
            return interval
        services = self.bot.services
        try:
            todo = await attendee_roles.changes(services.engine, services.versions, self.bot.config.roles)
            for grant in todo.add:
                if await self._send(guild_id, grant, add=True):
                    await attendee_roles.granted(services.engine, grant, self.bot.clock)
                    self.granted += 1
            for grant in todo.remove:
                if await self._send(guild_id, grant, add=False):
                    await attendee_roles.revoked(services.engine, grant)
                    self.removed += 1
        except DATABASE_ERRORS as exc:
            log.warning("attendee roles: database unreachable: %s", exc)
        return interval

    async def _send(self, guild_id: int, grant: Grant, *, add: bool) -> bool:
        now = asyncio.get_running_loop().time()
        if self._not_before.get((grant, add), now) > now:
            return False
        request = self.bot.http.add_role if add else self.bot.http.remove_role
        try:
            await request(guild_id, int(grant.member_id), int(grant.role_id), reason=REASON)
        except discord.HTTPException as exc:
            if exc.code == UNKNOWN_MEMBER:
                return True
            self._not_before[(grant, add)] = now + RETRY_SECONDS
            key = "add" if add else "remove"
            if (grant, key) not in self._reported:
                self._reported.add((grant, key))
                log.warning(
                    "attendee role %s: Discord refused to %s it for member %s: %s (code %s) %s",
                    grant.role_id,
                    key,
                    grant.member_id,
                    exc.status,
                    exc.code,
                    exc.text,
                )
            return False
        self._not_before.pop((grant, add), None)
        return True
