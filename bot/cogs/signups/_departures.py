"""Members who left the server give up their seats (``runner.signup_departures``).

The bot has no members intent (a privileged one an operator would have to switch on), so
Discord does not tell it when a member leaves. Instead the sign-up loop's passes ask about the
members on open lists, each at most once every ``CHECK_EVERY`` seconds and ``PER_PASS`` at a
time (``GET /guilds/{g}/members/{u}``): a member Discord no longer knows (10007, or 10013 for a
deleted account) left, also while the bot was offline, and leaves their lists by the click's
own leave, so a promotion happens once whichever process gets there. Any other refusal, another
404 included, stops the checks for ``CHECK_EVERY``: they are a courtesy, not worth invalid
requests.
"""

from __future__ import annotations

import asyncio
import logging

import discord

from bot.background import Background
from runner import signup_departures
from runner.signup_desk import SignupDesk

log = logging.getLogger(__name__)

# A member on an open list is asked about at most this often...
CHECK_EVERY = 600.0
# ...and at most this many in one pass of the sign-up loop.
PER_PASS = 10
# Discord's answers that mean the member is gone: not in the server, or no such user at all (a
# deleted account). Any other 404 (an unknown guild) says nothing about the member.
UNKNOWN_MEMBER = 10007
UNKNOWN_USER = 10013


class MemberDepartures:
    def __init__(self, kit: Background, desk: SignupDesk) -> None:
        self.kit = kit
        # Where a departure leaves the lists (and tells whoever shows them).
        self.desk = desk
        self._checked_at: dict[str, float] = {}
        self._paused_until = 0.0
        self.left = 0

    async def check_some(self) -> None:
        """Ask Discord about the members on open lists least recently asked about."""
        now = asyncio.get_running_loop().time()
        guild = self.kit.guild()
        if guild is None or now < self._paused_until:
            return
        listed = {
            entry.member_id: entry.member_name
            for entry in await signup_departures.on_open_lists(self.kit.engine)
        }
        due = [m for m in listed if now - self._checked_at.get(m, -CHECK_EVERY) >= CHECK_EVERY]
        due.sort(key=lambda m: self._checked_at.get(m, -CHECK_EVERY))
        for member_id in due[:PER_PASS]:
            self._checked_at[member_id] = now
            try:
                await guild.fetch_member(int(member_id))
            except discord.HTTPException as exc:
                if exc.status == 404 and exc.code in (UNKNOWN_MEMBER, UNKNOWN_USER):
                    await self._left(member_id, listed[member_id])
                    continue
                self._paused_until = now + CHECK_EVERY
                log.warning("sign-ups: Discord refused a member check (%s %s); paused", exc.status, exc.code)
                return
        # Forget members no longer on any list, so the memory stays the size of the lists.
        for member_id in set(self._checked_at) - set(listed):
            del self._checked_at[member_id]

    async def _left(self, member_id: str, name: str) -> None:
        answers = await self.desk.left_the_server(member_id, name, self.kit.clock.now())
        if answers:
            self.left += 1
            log.info("sign-ups: member %s left the server; taken off %d list(s)", member_id, len(answers))
