"""The calendar entry each scheduled occurrence should have (a Discord scheduled event), and the
service that finds which entries need pushing. No Discord here: the bot's publisher
(``bot.cogs.events_tab._loop``) turns a ``Work`` into requests and reports back.

What needs pushing is found **in proportion to changes, not ticks**; an idle pass is four
indexed queries that return nothing (or one row: the newest version):

* occurrences entering the horizon: scheduled runs starting by ``now + horizon`` with no listing,
  read from a lower bound that only moves forward, nearest first, never more listed at once than
  ``max_listed``;
* runs that changed: the run-log lines a ``runner.sql.run_log.LogFollower`` has not delivered
  (a status move, a new run, a re-pointed version all write one; a line committed after a
  higher id was read is still delivered, once);
* failed pushes whose back-off ran out, and pushes whose process died;
* every listing not in a final state, once at start-up (the reconcile: what changed while no
  process was watching) and after each publish (runs re-pointed at the new text).

Every push is claimed first on the listing row (``bridge.sql.listings``), and a new listing's row
is inserted, claimed, before the create request: two processes never push one change twice and
never create two Discord events for one run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.sql import listings as sql
from runner import backoff
from runner.catalog import VersionCache
from runner.clock import Clock
from runner.db import retry_on_conflict
from runner.definitions import EventDefinition
from runner.definitions.model import (
    DISCORD_EVENT_DESCRIPTION_MAX,
    DISCORD_EVENT_NAME_MAX,
    CronSchedule,
)
from runner.sql.run_log import LogFollower
from runner.states import ListingStatus, RunStatus

log = logging.getLogger(__name__)


_R = RunStatus
STATUS_OF_RUN: dict[RunStatus, ListingStatus] = {
    _R.SCHEDULED: ListingStatus.SCHEDULED,
    _R.STARTING: ListingStatus.SCHEDULED,
    _R.RUNNING: ListingStatus.ACTIVE,
    _R.PAUSED: ListingStatus.ACTIVE,
    _R.ENDING: ListingStatus.ACTIVE,
    _R.COMPLETED: ListingStatus.COMPLETED,
    _R.CANCELLED: ListingStatus.CANCELLED,
    _R.MISSED: ListingStatus.CANCELLED,
    _R.FAILED: ListingStatus.CANCELLED,
}
# Run-log lines one pass reads.
LOG_PAGE = 1000
# A listing that keeps failing is tried again at most hourly: Discord is not asked in a tight loop
# about an event it refuses, and an hour is short enough for a fix to show the same evening.
LONGEST_RETRY_SECONDS = 3600.0


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def listing_name(title: str, scope: str) -> str:
    return _cut(f"{title} ({scope})" if scope else title, DISCORD_EVENT_NAME_MAX)


@dataclass(frozen=True)
class Desired:
    """What the occurrence's calendar entry should show. Times are naive UTC."""

    run_id: int
    name: str
    description: str | None
    start: dt.datetime
    end: dt.datetime
    location: str
    status: ListingStatus
    # The schedule's zone, for a person reading the times (a rehearsal transcript).
    zone: str = "UTC"

    def digest(self) -> str:
        fields = [self.name, self.description, self.start.isoformat(), self.end.isoformat()]
        fields += [self.location, self.status.value]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def desired_state(
    run_id: int,
    definition: EventDefinition,
    *,
    scope: str,
    status: RunStatus | str,
    scheduled_for: dt.datetime,
    mirror_by_default: bool,
) -> Desired | None:
    """The entry for one run of ``definition`` (its own version), or None when the definition
    does not mirror. A definition that stopped mirroring wants its entry cancelled."""
    settings = definition.discord_event_settings(mirror_by_default)
    wanted = STATUS_OF_RUN[RunStatus(status)]
    if settings is None:
        # Nothing to say about an entry that should not exist beyond "not any more".
        settings_location, description, wanted = "Discord", None, ListingStatus.CANCELLED
    else:
        settings_location = settings.location
        description = settings.description or definition.description or None
    duration = dt.timedelta(seconds=definition.duration or 3600)
    zone = definition.schedule.timezone if isinstance(definition.schedule, CronSchedule) else "UTC"
    return Desired(
        run_id=run_id,
        name=listing_name(definition.title, scope),
        description=_cut(description, DISCORD_EVENT_DESCRIPTION_MAX) if description else None,
        start=scheduled_for,
        end=scheduled_for + duration,
        location=settings_location,
        status=wanted,
        zone=zone,
    )


@dataclass(frozen=True)
class Work:
    """One claimed listing to push: what it should show and what Discord was last told."""

    desired: Desired
    external_id: str | None
    pushed: str | None
    pushed_status: str | None
    # A row created by this claim: no request was ever made for it, so no event can exist yet.
    fresh: bool
    # Claims of this listing since it was last settled, this one included (the back-off's).
    attempts: int = 1


@dataclass
class PassReport:
    claimed: int = 0
    considered: int = 0
    queries: int = 0
    # The run log had more lines than one pass reads: pass again at once.
    more: bool = False


@dataclass
class ListingService:
    engine: AsyncEngine
    versions: VersionCache
    clock: Clock
    owner: str
    horizon_seconds: float = 7 * 24 * 3600.0
    max_listed: int = 50
    mirror_by_default: bool = False
    # Longer than any one push can take (discord.py waits out rate limits inside a request):
    # a takeover while the holder is still creating would create a second event.
    lease_seconds: float = 300.0
    retry_seconds: float = 300.0
    # Where the horizon scan resumes (None: from the first scheduled run).
    _scanned: dt.datetime | None = None
    # Runs at the scan's lower bound already judged not to mirror (so they are not read again).
    _not_mirrored: set[int] = field(default_factory=set)
    # Where the pass is in the run log (None: at start-up, from now).
    _follower: LogFollower | None = None
    _version_seen: int | None = None
    last: PassReport = field(default_factory=PassReport)

    @retry_on_conflict
    async def due(self) -> list[Work]:
        """Claim every listing that needs a push now (see the module docstring)."""
        follower = None if self._follower is None else self._follower.copy()
        kept = (self._scanned, set(self._not_mirrored), follower, self._version_seen)
        try:
            return await self._claim_due()
        except BaseException:
            # The pass's COMMIT failed (on Galera, a conflict certified at COMMIT), so none of its
            # claims stand: the log lines and horizon it consumed must be read again, or the
            # changes in them would never reach Discord.
            self._scanned, self._not_mirrored, self._follower, self._version_seen = kept
            raise

    async def _claim_due(self) -> list[Work]:
        now = self.clock.now()
        report = PassReport()
        work: list[Work] = []
        async with self.engine.begin() as conn:
            latest_version = await sql.latest_version_id(conn)
            report.queries += 1
            if self._follower is None or latest_version != self._version_seen:
                # At start-up, and after a publish (which may re-point runs at new text, however
                # that is logged): every open listing. The follower first, so a change made while
                # they are read is seen next pass.
                if self._follower is None:
                    self._follower = await LogFollower.from_now(conn)
                    report.queries += 1
                self._version_seen = latest_version
                changed = await sql.open_run_ids(conn)
                report.queries += 1
            else:
                changed = []
            lines, report.more = await self._follower.read(conn, LOG_PAGE, ("run_id", "kind"))
            report.queries += 1
            # Delivered now: a pass whose COMMIT fails goes back to the copy kept above.
            self._follower.delivered(int(line["id"]) for line in lines)
            for line in lines:
                run_id = int(line["run_id"])
                if str(line["kind"]).startswith("run.") and run_id not in changed:
                    changed.append(run_id)
            changed += [r for r in await sql.retry_due(conn, now) if r not in changed]
            report.queries += 1
            listed = await sql.with_listing(conn, changed)
            for run_id in changed:
                report.considered += 1
                item = await (
                    self._existing(conn, run_id, now) if run_id in listed else self._new(conn, run_id, now)
                )
                if item is not None:
                    work.append(item)
            work += await self._horizon(conn, now, report)
        report.claimed = len(work)
        self.last = report
        return work

    async def _horizon(self, conn: AsyncConnection, now: dt.datetime, report: PassReport) -> list[Work]:
        until = now + dt.timedelta(seconds=self.horizon_seconds)
        work: list[Work] = []
        room: int | None = None
        while True:
            limit = self.max_listed + len(self._not_mirrored)
            rows = await sql.unlisted_in_horizon(conn, self._scanned, until, limit)
            report.queries += 1
            fresh = [r for r in rows if int(r["id"]) not in self._not_mirrored]
            if not fresh:
                return work
            if room is None:
                room = self.max_listed - await sql.count_listed(conn)
            for row in fresh:
                run_id, moment = int(row["id"]), row["scheduled_for"]
                report.considered += 1
                if room <= 0:
                    return work  # the scan resumes here once a listed occurrence has ended
                if moment != self._scanned:
                    self._not_mirrored.clear()
                item = await self._new(conn, run_id, now)
                if item is None:
                    self._not_mirrored.add(run_id)
                else:
                    work.append(item)
                    room -= 1
                self._scanned = moment
            if len(rows) < limit:
                return work

    async def _definition(self, conn: AsyncConnection, run: sql.Row) -> EventDefinition | None:
        try:
            return await self.versions.get(conn, int(run["version_id"]))
        except Exception as exc:  # an unreadable version is logged by the cache; mirror nothing
            log.debug("listing: run %s: %s", run["id"], exc, extra={"run_id": run["id"]})
            return None

    async def _desired(self, conn: AsyncConnection, run: sql.Row) -> Desired | None:
        definition = await self._definition(conn, run)
        if definition is None:
            return None
        return desired_state(
            int(run["id"]),
            definition,
            scope=str(run["scope"]),
            status=run["status"],
            scheduled_for=run["scheduled_for"],
            mirror_by_default=self.mirror_by_default,
        )

    def _lease(self, now: dt.datetime) -> dt.datetime:
        return now + dt.timedelta(seconds=self.lease_seconds)

    async def _new(self, conn: AsyncConnection, run_id: int, now: dt.datetime) -> Work | None:
        """List an occurrence that has no entry yet, if it should have one."""
        run = await sql.run_row(conn, run_id)
        if (
            run is None
            or run["status"] != RunStatus.SCHEDULED
            or run["rehearsal"]
            or run["occurrence_at"] is None
        ):
            return None
        if run["scheduled_for"] > now + dt.timedelta(seconds=self.horizon_seconds):
            return None  # the horizon scan lists it when it comes in range
        desired = await self._desired(conn, run)
        if desired is None or desired.status is not ListingStatus.SCHEDULED:
            return None
        if not await sql.claim_new(conn, run_id, self.owner, self._lease(now), now):
            return None
        return Work(desired, None, None, None, fresh=True)

    async def _existing(self, conn: AsyncConnection, run_id: int, now: dt.datetime) -> Work | None:
        run = await sql.run_row(conn, run_id)
        if run is None:
            return None
        desired = await self._desired(conn, run)
        if desired is None:
            return None
        row = await sql.get(conn, run_id)
        if row is None or row["pushed"] == desired.digest():
            return None  # Discord already shows this: no claim, no request
        before = await sql.claim(conn, run_id, self.owner, self._lease(now), now)
        if before is None:
            return None
        return Work(
            desired,
            before["external_id"],
            before["pushed"],
            before["pushed_status"],
            fresh=False,
            attempts=int(before["attempts"]) + 1,
        )

    @retry_on_conflict
    async def created(self, work: Work, external_id: str) -> None:
        """Discord created the event: keep its id before anything else can go wrong."""
        async with self.engine.begin() as conn:
            await sql.store_external_id(conn, work.desired.run_id, self.owner, external_id, self.clock.now())

    @retry_on_conflict
    async def settle(
        self, work: Work, external_id: str | None, status: ListingStatus, *, digest: str | None = None
    ) -> None:
        """Discord now shows ``work.desired`` (or ``status`` says why nothing does)."""
        async with self.engine.begin() as conn:
            await sql.settle(
                conn,
                work.desired.run_id,
                self.owner,
                external_id=external_id,
                pushed=digest if digest is not None else work.desired.digest(),
                pushed_status=status,
                now=self.clock.now(),
            )

    @retry_on_conflict
    async def fail(self, work: Work, error: str) -> None:
        now = self.clock.now()
        wait = backoff.delay(work.attempts - 1, first=self.retry_seconds, cap=LONGEST_RETRY_SECONDS)
        async with self.engine.begin() as conn:
            await sql.fail(
                conn, work.desired.run_id, self.owner, error, now + dt.timedelta(seconds=wait), now
            )


async def mirrored_keys(engine: AsyncEngine, versions: VersionCache, mirror_by_default: bool) -> list[str]:
    """The published events whose occurrences are mirrored (what needs Manage Events)."""
    from runner.sql import definitions as definitions_sql

    keys = []
    async with engine.connect() as conn:
        for row in await definitions_sql.list_all(conn):
            try:
                definition = await versions.get(conn, int(row["current_version_id"]))
            except Exception:  # unreadable: the catalog logs it; it mirrors nothing
                continue
            if definition.discord_event_settings(mirror_by_default) is not None:
                keys.append(definition.key)
    return keys
