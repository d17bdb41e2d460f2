"""Tick stage 2: materialise upcoming occurrences of once/cron definitions (the occurrence key
makes a second insert a no-op) and mark missed those past their own definition's grace window."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner import catalog
from runner.db import DATABASE_ERRORS, retry_on_conflict
from runner.definitions import EventDefinition, ManualSchedule
from runner.engine.context import EngineContext
from runner.engine.core import DefinitionKey, StageResult, log
from runner.errors import UnreadableDefinition
from runner.history import Actor
from runner.lifecycle import move_run
from runner.schedule import MAX_OCCURRENCES_PER_PASS, moved_to, occurrences
from runner.sql import definitions as definitions_sql
from runner.sql import run_leases, run_occurrences
from runner.sql import runs as runs_sql
from runner.states import RunStatus

_TICK = dt.timedelta(microseconds=1)
# Who creates the runs of a recurring definition: no person.
SCHEDULE = Actor(None, "schedule")


class Materialise:
    """Create the runs of upcoming occurrences of once and cron definitions."""

    housekeeping = True

    async def run(self, ctx: EngineContext) -> StageResult:
        report = StageResult()
        now = ctx.clock.now()
        async with ctx.engine.connect() as conn:
            rows = await definitions_sql.list_for_materialising(conn)
        for row in rows:
            try:
                ahead = await self._horizon(ctx, row)
                until = now + dt.timedelta(seconds=ahead)
                # Refreshed once less than the horizon minus half the lookahead is covered: with
                # a reminder lead in the horizon, every reminder's run exists before its moment.
                refresh_before = until - dt.timedelta(seconds=ctx.settings.lookahead_seconds / 2)
                if row["materialised_until"] is not None and row["materialised_until"] > refresh_before:
                    continue
                report.materialised += await self._materialise_definition(ctx, row, now, until)
            except DATABASE_ERRORS:
                raise
            except Exception as exc:
                # One definition that cannot be worked out must not stop the tick for the rest.
                report.errors.append(f"definition {row['key']}: {exc!r}")
                if ctx.errors.first_time(DefinitionKey(int(row["id"])), exc):
                    log.exception("definition %s: cannot materialise its occurrences", row["key"])
        return report

    async def _horizon(self, ctx: EngineContext, row: sa.RowMapping) -> float:
        """How far ahead this definition's occurrences are created: the lookahead, further for a
        reminder's lead (its run must exist before the reminder is due) and for the Discord
        mirror's listing horizon. Read from the version cache: no query once cached."""
        ahead = ctx.settings.lookahead_seconds
        if row["current_version_id"] is None:
            return ahead
        version_id = int(row["current_version_id"])
        definition = ctx.versions.cached(version_id)
        if definition is None:
            try:
                async with ctx.engine.connect() as conn:
                    definition = await ctx.versions.get(conn, version_id)
            except UnreadableDefinition:
                # Worked out (and reported, once) by the materialise itself when it is due.
                return ahead
        if definition.reminders:
            ahead = max(ahead, definition.longest_reminder_lead() + ahead / 2)
        if definition.signup is not None and definition.signup.opens is not None:
            # The sign-up message is posted from the run: it must exist when sign-ups open.
            ahead = max(ahead, definition.signup.opens + ahead / 2)
        if definition.discord_event_settings(ctx.settings.list_by_default) is not None:
            ahead = max(ahead, ctx.settings.listing_horizon_seconds)
        return ahead

    @retry_on_conflict
    async def _materialise_definition(
        self, ctx: EngineContext, row: sa.RowMapping, now: dt.datetime, until: dt.datetime
    ) -> int:
        """Create the runs of every occurrence in ``(materialised_until, until]``, each under the
        version that was in force at its moment, at most ``MAX_OCCURRENCES_PER_PASS`` at a time;
        the bookkeeping advances only as far as the pass really reached."""
        created = 0
        definition_id = int(row["id"])
        async with ctx.engine.begin() as conn:
            history = await definitions_sql.version_history(conn, definition_id)
            # ``occurrences`` works out ``(after, until]``: starting a tick before a publishing
            # instant keeps an occurrence at that very instant, which the open bound dropped.
            after = row["materialised_until"] or (history[0]["published_at"] - _TICK)
            after = max(after, now - dt.timedelta(seconds=ctx.settings.lookback_seconds) - _TICK)
            remaining = MAX_OCCURRENCES_PER_PASS
            reached = until
            for index, version in enumerate(history):
                # A version is in force from its publishing instant until the next one's.
                lower = max(after, version["published_at"] - _TICK)
                upper = until if index + 1 == len(history) else history[index + 1]["published_at"] - _TICK
                upper = min(upper, until)
                if lower >= upper:
                    continue
                in_force = await self._version_in_force(ctx, conn, row, int(version["id"]))
                if in_force is None or isinstance(in_force.definition.schedule, ManualSchedule):
                    continue
                # A moved date's run holds the schedule's own moment as its occurrence key, which
                # may lie outside the window: the taken keys are read from the earliest of them.
                origins = moved_to(in_force.definition.schedule)
                since = min([lower, *(o for at, o in origins.items() if lower < at <= upper)])
                taken = await run_occurrences.occurrences_taken(conn, definition_id, since, upper)
                scopes = in_force.definition.run_scopes()
                for moment in self._moments(in_force.definition, lower, upper):
                    occurrence = origins.get(moment, moment)
                    missing = [scope for scope in scopes if (occurrence, scope) not in taken]
                    for scope in missing:
                        if await catalog.create_run(
                            conn, in_force, scope, moment, now, actor=SCHEDULE, occurrence=occurrence
                        ):
                            created += 1
                    # Only occurrences this pass really created count towards its budget: after a
                    # publish, walking the ones the old version already created costs nothing.
                    remaining -= 1 if missing else 0
                    if remaining == 0:
                        # The pass stopped at its cap, not at ``until``: only what it reached is
                        # done, and the next pass carries on from there. Recording ``until`` here
                        # silently dropped every occurrence between the cap and the lookahead.
                        reached = moment
                        break
                if remaining == 0:
                    break
            await definitions_sql.set_materialised_until(conn, definition_id, reached)
        return created

    @staticmethod
    def _moments(
        definition: EventDefinition, after: dt.datetime, until: dt.datetime
    ) -> Iterator[dt.datetime]:
        """Every occurrence in ``(after, until]``, however many: ``occurrences`` hands them out
        ``MAX_OCCURRENCES_PER_PASS`` at a time."""
        while True:
            chunk = list(occurrences(definition, after, until))
            yield from chunk
            if len(chunk) < MAX_OCCURRENCES_PER_PASS:
                return
            after = chunk[-1]

    async def _version_in_force(
        self, ctx: EngineContext, conn: AsyncConnection, row: sa.RowMapping, version_id: int
    ) -> catalog.CurrentDefinition | None:
        """The definition as it was published in ``version_id``. An older version that today's
        rules cannot read is passed over (logged once): the current one must still be worked out.
        The current version's problems propagate, as before."""
        try:
            definition = await ctx.versions.get(conn, version_id)
        except UnreadableDefinition as exc:
            if version_id == int(row["current_version_id"]):
                raise
            if ctx.errors.first_time(DefinitionKey(int(row["id"])), exc):
                log.warning("definition %s: version %s cannot be read: %s", row["key"], version_id, exc)
            return None
        return catalog.CurrentDefinition(int(row["id"]), version_id, definition)


class MarkMissed:
    """Scheduled runs past their own definition's grace window are ``missed``."""

    housekeeping = True

    @retry_on_conflict
    async def run(self, ctx: EngineContext) -> StageResult:
        now = ctx.clock.now()
        missed = 0
        async with ctx.engine.begin() as conn:
            for run_id in await run_leases.find_missed(conn, now):
                run = await runs_sql.get(conn, run_id)
                if run is None:
                    continue
                if await move_run(
                    conn,
                    run_id,
                    RunStatus.SCHEDULED,
                    RunStatus.MISSED,
                    now,
                    cancel_open=True,
                    last_error="missed: not started within its grace window",
                    scheduled_for=run.scheduled_for,
                ):
                    missed += 1
        return StageResult(missed=missed)
