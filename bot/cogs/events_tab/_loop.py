"""The Discord Scheduled Events mirror: each scheduled occurrence inside the horizon has one
guild scheduled event (the server's Events tab), created, edited, started, ended and cancelled
with its run.

``bridge.listings`` decides what needs pushing and claims it; this module only turns a claimed
``Work`` into requests, and runs in a loop of its own beside the ticker, so nothing it does (a
refused request, Discord down, a missing permission) holds up or fails a run. A failure is
logged once and shown to staff once (per run and error), then retried after a back-off.

Discord moves an event on by itself (scheduled -> active at its start, active -> completed at
its end, for external events), and staff may delete one: a push reads the event's status first
and only asks for the moves still needed; a deleted event is marked gone and never recreated.
"""

from __future__ import annotations

import datetime as dt
import logging

import discord

from bot.background import Background, LeasedLoop
from bot.work_lease import WorkLease
from bridge.listings import Desired, ListingService, Work, mirrored_keys
from runner.bus import ListingCreated, LogGrew
from runner.errors import Problem
from runner.preflight import MANAGE_EVENTS_MISSING
from runner.states import ListingStatus

log = logging.getLogger(__name__)

_S = discord.EventStatus
# Discord's status for each listing status.
_EVENT_STATUS = {
    ListingStatus.SCHEDULED: _S.scheduled,
    ListingStatus.ACTIVE: _S.active,
    ListingStatus.COMPLETED: _S.completed,
    ListingStatus.CANCELLED: _S.cancelled,
}
_ENDED = (_S.completed, _S.cancelled)
# A create for an occurrence starting sooner than this is not worth making (Discord refuses a
# start in the past, and the run is about to begin anyway).
CREATE_MARGIN = dt.timedelta(seconds=5)


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC)


def _status_of(event: discord.ScheduledEvent) -> ListingStatus:
    shown = {
        _S.scheduled: ListingStatus.SCHEDULED,
        _S.active: ListingStatus.ACTIVE,
        _S.completed: ListingStatus.COMPLETED,
    }
    return shown.get(event.status, ListingStatus.CANCELLED)


class Mirror(LeasedLoop):
    """The publisher. ``requests`` counts every scheduled-event request it made (the benchmark
    reads it to show that requests follow changes, not ticks)."""

    work = "events-mirror"
    # Runs are materialised, moved and ended by ticks; a control ends one too (then a tick runs).
    wakes_on = (LogGrew,)

    def __init__(
        self, kit: Background, service: ListingService, *, lease: WorkLease, interval: float
    ) -> None:
        super().__init__(kit, lease=lease, interval=interval)
        self.service = service
        self.requests = 0
        self.passes = 0
        # The missing Manage Events permission was shown (once per process).
        self._permission_reported = False

    @property
    def guild(self) -> discord.Guild | None:
        return self.kit.guild()

    def may_manage_events(self) -> bool | None:
        guild = self.guild
        if guild is None or guild.me is None:
            return None
        return guild.me.guild_permissions.manage_events

    async def pass_once(self) -> float:
        """One pass (never raises): claim what changed and push it."""
        interval = self.loop.interval
        self.passes += 1
        guild = self.guild
        if guild is None:
            return interval  # not this process's guild: the one that holds it mirrors
        # Of several processes on one database, only the holder mirrors (each listing is
        # claimed row by row as well, so even two passes at once create one event).
        if self.lease is not None and await self.lease.take() is None:
            return interval  # another process mirrors
        try:
            if self.may_manage_events() is False and not self._permission_reported:
                await self._preflight()
            work = await self.service.due()
        except Exception as exc:
            self._report_once(None, f"cannot read the listings: {type(exc).__name__}: {exc}")
            return interval
        for item in work:
            await self._push_guarded(guild, item)
        return 0.0 if self.service.last.more else interval

    async def _preflight(self) -> None:
        if self.may_manage_events() is not False:
            return
        keys = await mirrored_keys(self.service.engine, self.service.versions, self.service.mirror_by_default)
        if keys:
            self._report_once(
                None, f"{MANAGE_EVENTS_MISSING}; mirrored events: {', '.join(keys)}", key="permission"
            )

    async def _push_guarded(self, guild: discord.Guild, work: Work) -> None:
        run_id = work.desired.run_id
        try:
            if self.may_manage_events() is False:
                raise PermissionError(MANAGE_EVENTS_MISSING)
            await self.push(guild, work)
        except Exception as exc:
            if isinstance(exc, PermissionError):
                # One notice for the whole server, not one per occurrence.
                text = str(exc)
                self._report_once(None, text, key="permission")
            else:
                text = f"{type(exc).__name__}: {exc}"
                self._report_once(run_id, text)
            try:
                await self.service.fail(work, text)
            except Exception:
                log.warning(
                    "mirror: could not record the failure of run %s", run_id, extra={"run_id": run_id}
                )

    async def push(self, guild: discord.Guild, work: Work) -> None:
        """Make Discord show ``work.desired``; settle the listing with what it now shows."""
        desired = work.desired
        event = await self._event(guild, work)
        if event is None:
            if work.external_id is not None:
                # Deleted in Discord (by staff, or never there): recreating it would undo them.
                await self.service.settle(work, work.external_id, ListingStatus.GONE)
                return
            now = self.service.clock.now()
            if desired.status is not ListingStatus.SCHEDULED or desired.start <= now + CREATE_MARGIN:
                await self.service.settle(work, None, ListingStatus.SKIPPED)
                return
            event = await self._create(guild, desired)
            await self.service.created(work, str(event.id))
            await self.service.settle(work, str(event.id), ListingStatus.SCHEDULED)
            self.kit.bus.publish(ListingCreated())
            return
        event = await self._move(event, desired)
        await self.service.settle(work, str(event.id), _status_of(event))

    async def _event(self, guild: discord.Guild, work: Work) -> discord.ScheduledEvent | None:
        """The listing's Discord event as it is now; a create that died before its id was stored
        is found among the bot's own events (same name and start) and adopted."""
        if work.external_id is None:
            if work.fresh:
                return None
            self.requests += 1
            events = await guild.fetch_scheduled_events(with_counts=False)
            me = self.kit.client.user.id if self.kit.client.user else None
            start = _aware(work.desired.start)
            for candidate in events:
                if (
                    candidate.creator_id == me
                    and candidate.name == work.desired.name
                    and candidate.start_time == start
                ):
                    return candidate
            return None
        event = guild.get_scheduled_event(int(work.external_id))
        if event is not None:
            return event
        try:
            self.requests += 1
            return await guild.fetch_scheduled_event(int(work.external_id), with_counts=False)
        except discord.NotFound:
            return None

    def _where(
        self, guild: discord.Guild, location: str
    ) -> tuple[discord.VoiceChannel | discord.StageChannel | None, str]:
        """A voice or stage channel the location names, or the text to show."""
        channel_id = self.kit.config.channel_id(location)
        channel = guild.get_channel(channel_id) if channel_id is not None else None
        if isinstance(channel, discord.VoiceChannel | discord.StageChannel):
            return channel, channel.name
        if channel is not None:
            return None, f"#{channel.name}"
        return None, location

    async def _create(self, guild: discord.Guild, desired: Desired) -> discord.ScheduledEvent:
        channel, text = self._where(guild, desired.location)
        self.requests += 1
        if channel is not None:
            # discord.py picks the entity type (voice or stage) from the channel.
            return await guild.create_scheduled_event(
                name=desired.name,
                start_time=_aware(desired.start),
                end_time=_aware(desired.end),
                channel=channel,
                privacy_level=discord.PrivacyLevel.guild_only,
                description=desired.description or "",
            )
        return await guild.create_scheduled_event(
            name=desired.name,
            start_time=_aware(desired.start),
            end_time=_aware(desired.end),
            entity_type=discord.EntityType.external,
            location=text,
            privacy_level=discord.PrivacyLevel.guild_only,
            description=desired.description or "",
        )

    async def _move(self, event: discord.ScheduledEvent, desired: Desired) -> discord.ScheduledEvent:
        """The edits and status moves still needed, from the status Discord shows now."""
        if event.status in _ENDED:
            return event  # over in Discord (it ends events by itself): nothing can reopen it
        if event.status is _S.scheduled and desired.status is ListingStatus.SCHEDULED:
            if self._details_differ(event, desired):
                self.requests += 1
                event = await self._edit(event, desired)
            return event
        if desired.status is ListingStatus.SCHEDULED:
            return event  # it started by itself at its start time, ahead of the run: leave it
        if event.status is _S.scheduled:
            if desired.status is ListingStatus.CANCELLED:
                self.requests += 1
                return await event.cancel()
            self.requests += 1
            event = await event.start()
        if desired.status is ListingStatus.ACTIVE:
            return event
        # Completed, or cancelled once active (Discord lets an active event only end).
        self.requests += 1
        return await event.end()

    async def _edit(self, event: discord.ScheduledEvent, desired: Desired) -> discord.ScheduledEvent:
        start, end = _aware(desired.start), _aware(desired.end)
        description = desired.description or ""
        channel, text = (
            self._where(event.guild, desired.location) if event.guild else (None, desired.location)
        )
        if channel is not None:
            return await event.edit(
                name=desired.name, description=description, start_time=start, end_time=end, channel=channel
            )
        return await event.edit(
            name=desired.name,
            description=description,
            start_time=start,
            end_time=end,
            entity_type=discord.EntityType.external,
            location=text,
        )

    def _details_differ(self, event: discord.ScheduledEvent, desired: Desired) -> bool:
        channel, text = (
            self._where(event.guild, desired.location) if event.guild else (None, desired.location)
        )
        moved = event.channel_id != channel.id if channel is not None else event.location != text
        return (
            moved
            or event.name != desired.name
            or (event.description or None) != desired.description
            or event.start_time != _aware(desired.start)
            or event.end_time != _aware(desired.end)
        )

    def _report_once(self, run_id: int | None, text: str, *, key: str | None = None) -> None:
        """Log and show staff a failure once per run and error (or per ``key``); the listing
        retries on its own."""
        if not self.refusals.first_time((run_id, key or text)):
            return
        if key == "permission":
            self._permission_reported = True
        where = f"run {run_id}" if run_id is not None else "the Events tab"
        message = f"Discord event mirror, {where}: {text}"[:1900]
        log.warning("%s", message, extra={"run_id": run_id})
        self.kit.tell_staff(message)


async def listing_status_line(mirror: Mirror | None) -> str | None:
    """One line for ``/event status`` when the mirror cannot work: published events are
    mirrored and the bot lacks Manage Events (None: nothing to say)."""
    if mirror is None or mirror.may_manage_events() is not False:
        return None
    keys = await mirrored_keys(
        mirror.service.engine, mirror.service.versions, mirror.service.mirror_by_default
    )
    if not keys:
        return None
    named = ", ".join(keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")
    return f"⚠️ Events tab: {MANAGE_EVENTS_MISSING} (mirrored: {named})."[:1900]


def listing_problems(mirror: Mirror | None, definition: object) -> list[Problem]:
    """Preflight's Discord-side check for one definition (the coordinator adds it to a start's
    problems): a mirrored event and no Manage Events."""
    from runner.definitions import EventDefinition
    from runner.preflight import listing_problem

    if mirror is None or not isinstance(definition, EventDefinition):
        return []
    problem = listing_problem(
        definition,
        mirror_by_default=mirror.service.mirror_by_default,
        may_manage_events=mirror.may_manage_events() is not False,
    )
    return [problem] if problem else []
