"""Gives an event's ``attendee_role`` to its confirmed attendees and takes it back.

The reconcile of ``bridge.attendee_roles``, in a loop of its own (woken after every tick and
sign-up change) held
by one process (the ``attendee-roles`` lease): each pass asks what to add and what to remove,
and sends ``PUT`` / ``DELETE /guilds/{g}/members/{u}/roles/{r}``. Both requests are idempotent
at Discord, so one repeated after a crash between the answer and the record is harmless.

Never a role that is unsafe to hand out. Right before giving, the role as Discord has it now
(``bot.cogs.signups._role_checks``) must carry no bot capability and no permission beyond plain
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

import logging

import discord

from bot import discord_rest
from bot.background import Background, LeasedLoop
from bot.cogs.signups._role_checks import GONE, UNMANAGEABLE, UNSAFE, Blocked, blocked
from bot.work_lease import WorkLease
from bridge import attendee_roles
from bridge.attendee_roles import Grant
from runner.bus import LogGrew, SignupsChanged

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


class AttendeeRoles(LeasedLoop):
    work = "attendee-roles"
    # A tick settles seats (a run ends, a promotion); a click or an import changes the lists.
    wakes_on = (LogGrew, SignupsChanged)

    def __init__(self, kit: Background, *, lease: WorkLease, interval: float) -> None:
        super().__init__(kit, lease=lease, interval=interval)
        self.granted = 0
        self.removed = 0

    async def pass_once(self) -> float:
        guild = self.kit.guild()
        if guild is None or guild.unavailable:
            # Not this process's guild, or Discord cannot say what its roles are.
            return self.loop.interval
        return await super().pass_once()

    async def work_once(self) -> None:
        guild = self.kit.guild()
        assert guild is not None
        engine = self.kit.engine
        todo = await attendee_roles.changes(engine, self.kit.versions, self.kit.config.roles)
        stops: dict[str, Blocked | None] = {}
        for grant in todo.forget:
            await attendee_roles.revoked(engine, grant)
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
                await attendee_roles.revoked(engine, grant)

    def _may(
        self, guild: discord.Guild, grant: Grant, stops: dict[str, Blocked | None], *, giving: bool
    ) -> bool:
        """The live role allows this request (looked at once per role a pass); tells the staff
        once per role and reason when it does not."""
        if grant.role_id not in stops:
            found = blocked(guild, self.kit.config, int(grant.role_id), giving=giving)
            stops[grant.role_id] = found
            if found is None:
                # Taking back skips the safety check, so it cannot say an unsafe role was fixed.
                for kind in BLOCKED_KINDS if giving else (GONE, UNMANAGEABLE):
                    self.refusals.cleared((grant.role_id, kind))
            else:
                self._tell(grant.role_id, found.kind, found.text)
        return stops[grant.role_id] is None

    async def _give(self, guild: discord.Guild, grant: Grant, *, known: bool) -> None:
        engine, clock = self.kit.engine, self.kit.clock
        if not self.refusals.may_try((grant, True)):
            return
        if not known:
            try:
                held = await discord_rest.member_role_ids(self.kit.client, guild.id, grant.member_id)
            except discord.HTTPException as exc:
                await self._failed(grant, exc, add=True)
                return
            if grant.role_id in held:
                await attendee_roles.held(engine, grant, clock)
                return
            await attendee_roles.giving(engine, grant, clock)
        try:
            await discord_rest.add_role(self.kit.client, guild.id, grant.member_id, grant.role_id, REASON)
        except discord.HTTPException as exc:
            await self._failed(grant, exc, add=True)
            return
        self.refusals.done((grant, True))
        await attendee_roles.granted(engine, grant, clock)
        self.granted += 1

    async def _take(self, guild: discord.Guild, grant: Grant) -> None:
        if not self.refusals.may_try((grant, False)):
            return
        try:
            await discord_rest.remove_role(self.kit.client, guild.id, grant.member_id, grant.role_id, REASON)
        except discord.HTTPException as exc:
            await self._failed(grant, exc, add=False)
            return
        self.refusals.done((grant, False))
        await attendee_roles.revoked(self.kit.engine, grant)
        self.removed += 1

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
        self.refusals.refused((grant, add), wait=RETRY_SECONDS)
        self.refusals.log_once(
            (grant.role_id, f"retry-{verb}"),
            f"attendee role {grant.role_id}: could not {verb} it for member {grant.member_id}: "
            f"{exc.status} (code {exc.code}) {exc.text}; trying again in {RETRY_SECONDS:.0f} s",
        )

    async def _stop(self, grant: Grant, reason: str, *, add: bool) -> None:
        engine = self.kit.engine
        if add:
            await attendee_roles.stopped(engine, grant, self.kit.clock, reason)
        else:
            await attendee_roles.revoked(engine, grant)

    def _tell(self, role_id: str, kind: str, text: str) -> None:
        """Log and tell the staff log, once per role and kind (again only once it cleared)."""
        if self.refusals.log_once((role_id, kind), f"attendee role {role_id}: {text}"):
            self.kit.tell_staff(f"⚠️ {text}")
