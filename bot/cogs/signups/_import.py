"""Imports the members who marked a run's Discord scheduled event "Interested" as its sign-ups,
one way, in a loop of its own held by one process (the ``signup-import`` work lease).

For each run ``bridge.interested`` names (a listing with a Discord event, ``signup.interested``
set, sign-ups still open) the loop reads the event's Interested list,
``GET /guilds/{g}/scheduled-events/{e}/users``, in pages of ``PAGE`` (Discord sorts the users by
id, so each page asks for the users ``after`` the last one seen), when the listing first shows
up and then every ``POLL_SECONDS``. Each member not yet signed up (nor imported before) is handed
to ``runner.signups.import_interested``, which signs them up in that option as their click would:
capacity, the waiting list and ``signup.roles`` hold, and the database records the import.

One way: a member who leaves is not signed up again by the next poll (their sign-up row stays,
as left), one refused for their roles is recorded and not asked about again, and taking the
Interested mark off in Discord changes nothing here. The list is read with ``with_member=false``
unless the sign-up takes only some roles: then each member's roles come in the same page
(``with_member=true``), rather than a request per member.

The requests are GETs through discord.py's HTTP client, which keeps to the route's rate limit;
at most one poll per run every five minutes keeps them few. The time of each run's last poll is
the holder's memory only: a process that takes the lease over polls every run once at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import discord

from bot import discord_rest
from bot.background import Background, LeasedLoop
from bot.errors import DATABASE_ERRORS
from bot.work_lease import WorkLease
from bridge import interested
from bridge.interested import InterestedImport, imports_due
from runner import signup_reads
from runner.bus import ListingCreated
from runner.signup_desk import SignupDesk
from runner.signups import Confirmed, Refused, RefusedWhy, Waitlisted

log = logging.getLogger(__name__)

# Discord's largest page of the Interested list.
PAGE = 100
POLL_SECONDS = 300.0


def _user_id(entry: Mapping[str, Any]) -> int:
    return int(entry["user"]["id"])


def _name(entry: Mapping[str, Any]) -> str:
    member = entry.get("member") or {}
    user = entry["user"]
    return str(member.get("nick") or user.get("global_name") or user["username"])


class SignupImports(LeasedLoop):
    work = "signup-import"
    # A new listing's Interested list is read at once (then every few minutes).
    wakes_on = (ListingCreated,)

    def __init__(self, kit: Background, desk: SignupDesk, *, lease: WorkLease, interval: float) -> None:
        super().__init__(kit, lease=lease, interval=interval)
        self.desk = desk
        # Clock time of each run's last poll (runs no longer due are forgotten).
        self.polled_at: dict[int, float] = {}
        self.requests = 0
        self.imported = 0
        # The runs due at this pass (read before the lease is taken).
        self._due: list[InterestedImport] = []

    async def pass_once(self) -> float:
        """One pass (never raises): poll the runs whose turn it is."""
        interval = self.loop.interval
        if self.kit.guild() is None:
            return interval  # not this process's guild
        try:
            due = await imports_due(self.kit.engine, self.kit.versions, self.kit.clock.now())
        except DATABASE_ERRORS as exc:
            self.refusals.log_once("database", f"sign-up import: database unreachable: {exc}")
            return interval
        # Nothing to import (most servers, most of the time): no lease taken, so an idle import
        # writes nothing while the ticker starts a burst of runs.
        if not due:
            return interval
        self._due = due
        return await super().pass_once()

    def lease_elsewhere(self) -> None:
        self.polled_at.clear()  # the holder polls; on taking over, every run is polled at once

    async def work_once(self) -> None:
        guild = self.kit.guild()
        assert guild is not None
        due = self._due
        due_ids = {target.run_id for target in due}
        self.polled_at = {run_id: at for run_id, at in self.polled_at.items() if run_id in due_ids}
        for target in due:
            now = self.kit.clock.now().timestamp()
            last = self.polled_at.get(target.run_id)
            if last is not None and now - last < POLL_SECONDS:
                continue
            self.polled_at[target.run_id] = now
            await self.poll(guild.id, target)

    async def poll(self, guild_id: int, target: InterestedImport) -> bool:
        """Read the run's whole Interested list and import whoever is new; True when someone was
        signed up. A refusal by Discord or an unreachable database waits for the next poll."""
        imported_before = self.imported
        try:
            known = await signup_reads.known_members(self.kit.engine, target.run_id)
            after: int | None = None
            while True:
                self.requests += 1
                page = await discord_rest.interested_page(
                    self.kit.client,
                    guild_id,
                    target.event_id,
                    limit=PAGE,
                    with_member=target.needs_roles,
                    after=after,
                )
                # Sorted by id as Discord sends them; an entry at or before ``after`` (a server
                # that did not page) is not read twice, and the loop ends when nothing is new.
                fresh = sorted((e for e in page if _user_id(e) > (after or 0)), key=_user_id)
                if not await self._import(target, fresh, known) or len(page) < PAGE or not fresh:
                    break
                after = _user_id(fresh[-1])
        except discord.NotFound:
            # 10070 Unknown Scheduled Event: deleted by hand. Final for that event: asking every
            # poll until sign-ups close would only collect invalid requests.
            await self._event_gone(target)
        except discord.HTTPException as exc:
            self.refusals.log_once(
                (target.run_id, exc.status, exc.code),
                f"sign-up import, run {target.run_id}: Discord refused the Interested list: "
                f"{exc.status} (code {exc.code}) {exc.text}",
            )
        except DATABASE_ERRORS as exc:
            log.warning("sign-up import, run %s: database unreachable: %s", target.run_id, exc)
        count = self.imported - imported_before
        if count:
            log.info(
                "sign-up import, run %s: %d interested signed up to %s",
                target.run_id,
                count,
                target.option,
                extra={"run_id": target.run_id},
            )
        return count > 0

    async def _import(
        self, target: InterestedImport, entries: Sequence[Mapping[str, Any]], known: set[str]
    ) -> bool:
        """Import the members of one page not ``known`` yet; False once the run takes no more
        sign-ups (closed, over or gone since the list was read)."""
        for entry in entries:
            member_id = str(_user_id(entry))
            if member_id in known:
                continue
            answer = await self.desk.import_interested(
                target.run_id,
                member_id,
                _name(entry),
                self._aliases(entry),
                self.kit.clock.now(),
            )
            if isinstance(answer, Refused) and answer.why != RefusedWhy.NOT_ALLOWED_ROLE:
                return False
            known.add(member_id)
            if isinstance(answer, Confirmed | Waitlisted):
                self.imported += 1
        return True

    def _aliases(self, entry: Mapping[str, Any]) -> list[str]:
        """The config's role aliases the member holds (only sent when the sign-up needs them)."""
        return self.kit.config.aliases_held(
            int(role) for role in (entry.get("member") or {}).get("roles", ())
        )

    async def _event_gone(self, target: InterestedImport) -> None:
        if not await interested.event_gone(self.kit.engine, target, self.kit.clock.now()):
            return
        log.warning(
            "sign-up import, run %s: its Discord event %s was deleted; its Interested list is no longer read",
            target.run_id,
            target.event_id,
            extra={"run_id": target.run_id},
        )
        self.kit.tell_staff(
            f"⚠️ Run {target.run_id}'s Discord event was deleted: members who mark it Interested "
            "are no longer signed up (the sign-up message still takes clicks)."
        )
