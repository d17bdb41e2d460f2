"""Gives an event's ``attendee_role`` to its confirmed attendees and takes it back.

The reconcile of ``runner.attendee_roles``, in a loop of its own (nudged after every tick) held
by one process (the ``attendee-roles`` lease): each pass asks what to add and what to remove,
and sends ``PUT`` / ``DELETE /guilds/{g}/members/{u}/roles/{r}``. Both requests are idempotent
at Discord, so one repeated after a crash between the answer and the record is harmless.

Never a role that is unsafe to hand out. Right before giving, the role as Discord has it now
(``bot.attendee_role_checks``) must carry no bot capability and no permission beyond plain
membership (``wiring.attendee_role_rule``); a role edited to gain one after publish is refused
here, with no request. A role that is gone, above the bot's own, or a bot without Manage Roles
costs no request either. Each such refusal is logged and told to the staff log once per role
and reason, and looked at again (for free) every pass, so the grants go ahead once it is fixed.

Only what the bot gave is taken back. Before giving, the bot reads the member
(``GET /guilds/{g}/members/{u}``): a member who already holds the role keeps it at the end.

Discord's final answers stop, once: 10007 Unknown Member, 10011 Unknown Role, and 403 (50013
Missing Permissions, 50001 Missing Access) are recorded for that grant (never asked again) or
end that removal (the record goes), and staff are told once per role and kind. Anything else
(a rate limit, a 5xx, the network) is tried again a minute later, not every pass.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import discord

from bot.attendee_role_checks import GONE, UNMANAGEABLE, UNSAFE, Blocked, blocked
from bot.errors import DATABASE_ERRORS
from bot.loops.ticker import WakeableLoop
from runner import attendee_roles
from runner.attendee_roles import Grant

if TYPE_CHECKING:
    from bot.app import EventBot

log = logging.getLogger(__name__)

UNKNOWN_MEMBER = 10007
UNKNOWN_ROLE = 10011
MISSING_ACCESS = 50001
MISSING_PERMISSIONS = 50013
REASON = "event attendee"
# After a transient failure, that grant is not asked for again for this long: a failure repeated
# every pass would count against Discord's limits.
RETRY_SECONDS = 60.0
# What the live role can stop: told again if it recurs after it cleared.
BLOCKED_KINDS = (GONE, UNSAFE, UNMANAGEABLE)


def final(exc: discord.HTTPException) -> bool:
    """Discord's answer will not change by asking again (about this role or member)."""
    return exc.status in (403, 404) or exc.code in (
        UNKNOWN_MEMBER,
        UNKNOWN_ROLE,
        MISSING_ACCESS,
        MISSING_PERMISSIONS,
    )


class AttendeeRoles:
    def __init__(self, bot: EventBot, *, interval: float) -> None:
        self.bot = bot
        self.lease = bot.lease_for("attendee-roles")
        self.granted = 0
        self.removed = 0
        # (role id, kind) -> what the staff were told; a kind that clears is told again if it recurs.
        self._told: dict[tuple[str, str], str] = {}
        # Loop time before which a grant (or removal) that failed transiently is not tried again.
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
        guild = self.bot.get_guild(guild_id) if guild_id is not None else None
        if guild is None or guild.unavailable:
            return interval  # not this process's guild, or Discord cannot say what its roles are
        if await self.lease.take() is None:
            return interval
        services = self.bot.services
        try:
            todo = await attendee_roles.changes(services.engine, services.versions, self.bot.config.roles)
            stops: dict[str, Blocked | None] = {}
            for grant in todo.forget:
                await attendee_roles.revoked(services.engine, grant)
            for grant in [*todo.retry, *todo.add]:
                if not self._may(guild, grant, stops, giving=True):
                    continue
                await self._give(guild, grant, known=grant in todo.retry)
            stops = {}
            for grant in todo.remove:
                if self._may(guild, grant, stops, giving=False):
                    await self._take(guild, grant)
                elif (found := stops[grant.role_id]) is not None and found.kind == GONE:
                    # Deleted: nobody holds it any more, so there is nothing to take back.
                    await attendee_roles.revoked(services.engine, grant)
        except DATABASE_ERRORS as exc:
            log.warning("attendee roles: database unreachable: %s", exc)
        return interval

    def _may(
        self, guild: discord.Guild, grant: Grant, stops: dict[str, Blocked | None], *, giving: bool
    ) -> bool:
        """The live role allows this request (looked at once per role a pass); tells the staff
        once per role and reason when it does not."""
        if grant.role_id not in stops:
            found = blocked(guild, self.bot.config, int(grant.role_id), giving=giving)
            stops[grant.role_id] = found
            if found is None:
                # Taking back skips the safety check, so it cannot say an unsafe role was fixed.
                for kind in BLOCKED_KINDS if giving else (GONE, UNMANAGEABLE):
                    self._told.pop((grant.role_id, kind), None)
            else:
                self._tell(grant.role_id, found.kind, found.text)
        return stops[grant.role_id] is None

    async def _give(self, guild: discord.Guild, grant: Grant, *, known: bool) -> None:
        engine, clock = self.bot.services.engine, self.bot.clock
        if not self._due(grant, add=True):
            return
        if not known:
            try:
                member = await self.bot.http.get_member(guild.id, int(grant.member_id))
            except discord.HTTPException as exc:
                await self._failed(grant, exc, add=True)
                return
            if grant.role_id in member.get("roles", ()):
                await attendee_roles.held(engine, grant, clock)
                return
            await attendee_roles.giving(engine, grant, clock)
        try:
            await self.bot.http.add_role(guild.id, int(grant.member_id), int(grant.role_id), reason=REASON)
        except discord.HTTPException as exc:
            await self._failed(grant, exc, add=True)
            return
        self._not_before.pop((grant, True), None)
        await attendee_roles.granted(engine, grant, clock)
        self.granted += 1

    async def _take(self, guild: discord.Guild, grant: Grant) -> None:
        if not self._due(grant, add=False):
            return
        try:
            await self.bot.http.remove_role(guild.id, int(grant.member_id), int(grant.role_id), reason=REASON)
        except discord.HTTPException as exc:
            await self._failed(grant, exc, add=False)
            return
        self._not_before.pop((grant, False), None)
        await attendee_roles.revoked(self.bot.services.engine, grant)
        self.removed += 1

    def _due(self, grant: Grant, *, add: bool) -> bool:
        return self._not_before.get((grant, add), 0.0) <= asyncio.get_running_loop().time()

    async def _failed(self, grant: Grant, exc: discord.HTTPException, *, add: bool) -> None:
        verb = "give" if add else "take back"
        if exc.code == UNKNOWN_MEMBER:
            # Left the server: nothing to give, nothing to take back.
            await self._stop(grant, attendee_roles.MEMBER_LEFT, add=add)
            return
        if final(exc):
            reason = attendee_roles.ROLE_GONE if exc.code == UNKNOWN_ROLE else attendee_roles.REFUSED
            await self._stop(grant, reason, add=add)
            self._tell(
                grant.role_id,
                f"final-{verb}",
                f"Discord refused to {verb} attendee role {grant.role_id} (member {grant.member_id}): "
                f"{exc.status} {exc.text or ''} (code {exc.code}); the bot will not ask again for "
                + ("this member" if add else "this member: take it off by hand if they should not keep it"),
            )
            return
        self._not_before[(grant, add)] = asyncio.get_running_loop().time() + RETRY_SECONDS
        if (grant.role_id, f"retry-{verb}") not in self._told:
            self._told[(grant.role_id, f"retry-{verb}")] = "logged"
            log.warning(
                "attendee role %s: could not %s it for member %s: %s (code %s) %s; trying again in %.0f s",
                grant.role_id,
                verb,
                grant.member_id,
                exc.status,
                exc.code,
                exc.text,
                RETRY_SECONDS,
            )

    async def _stop(self, grant: Grant, reason: str, *, add: bool) -> None:
        engine = self.bot.services.engine
        if add:
            await attendee_roles.stopped(engine, grant, self.bot.clock, reason)
        else:
            await attendee_roles.revoked(engine, grant)

    def _tell(self, role_id: str, kind: str, text: str) -> None:
        """Log and tell the staff log, once per role and kind (again only once it cleared)."""
        if (role_id, kind) in self._told:
            return
        self._told[(role_id, kind)] = text
        log.warning("attendee role %s: %s", role_id, text)
        staff = self.bot.staff_log
        if staff is not None:
            staff.notice(f"⚠️ {text}")
