"""What the command line calls: rehearse a file, carry on an interrupted rehearsal, or cancel
what one left."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import tempfile
from pathlib import Path
from typing import TextIO

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from rehearsal.console import Console, run_label
from rehearsal.delivery import ConsoleDelivery
from rehearsal.session import ACTOR, REHEARSAL_SETTINGS, Rehearsal, RehearsalOptions, Sleep, lead_before_start
from rehearsal.signups import SignupsRefused, simulated_choices
from runner import schedule, views
from runner.clock import ManualClock, utcnow
from runner.controls import Controls
from runner.db import create_engine
from runner.definitions import EventDefinition, load_file
from runner.errors import DefinitionError
from runner.history import Actor
from runner.migrate import upgrade
from runner.redaction import masked_url
from runner.states import RunStatus
from wiring.config import Config
from wiring.control_text import control_text
from wiring.services import assemble


async def rehearse(
    options: RehearsalOptions,
    config: Config,
    *,
    stream: TextIO | None = None,
    sleep: Sleep = asyncio.sleep,
) -> int:
    """Validate, publish, start and play ``options.file``; the exit code is 0 only when every
    run completed."""
    assert options.file is not None, "resume_rehearsals carries on without a file"
    starts_at = utcnow().replace(microsecond=0)
    clock = ManualClock(starts_at)
    # The console counts from the start (+00:00:00), whatever comes before it.
    console = Console(clock, as_json=options.as_json, stream=stream, verbose=options.verbose)
    if options.config_line:
        console.note(options.config_line)
    try:
        definition = load_file(options.file, validation_registry())
    except DefinitionError as exc:
        console.note(f"{options.file} is not a valid event definition:")
        console.problems(exc.problems)
        return 1
    if options.signups is not None:
        try:
            simulated_choices(options.signups, definition)
        except SignupsRefused as exc:
            console.emit("error", str(exc), message=str(exc))
            return 1
    starts_at, when = _next_real_start(definition, starts_at, config)
    console.start = starts_at  # the times shown count from the start
    # The reminders (and a sign-up message) go out before the start, at negative times: the
    # clock begins at the first.
    clock.set(starts_at - lead_before_start(definition, options))
    scopes = definition.run_scopes() if options.scope is None else [options.scope]
    where = f"in {len(scopes)} scopes ({', '.join(scopes)})" if any(scopes) else "with no scope"
    console.note(f'Rehearsing "{definition.title}" ({definition.key}) from {options.file} {where}.')
    console.note("Nothing is sent to Discord: messages are shown here as players and GMs would see them.")
    if when:
        console.note(when)
    with tempfile.TemporaryDirectory(prefix="eventbot-rehearsal-") as scratch:
        url = options.database_url or f"sqlite+aiosqlite:///{Path(scratch) / 'rehearsal.sqlite3'}"
        engine = create_engine(url)
        try:
            await upgrade(engine)
            if options.database_url and not await _database_is_idle(engine, console, url):
                return 1
            delivery = ConsoleDelivery(console, config)
            services = assemble(
                engine,
                lambda _describe: delivery,
                clock=clock,
                settings=dataclasses.replace(REHEARSAL_SETTINGS, approve_from=config.approve_from),
                owner=ACTOR.name,
                # A rehearsal run sends nothing to them: the step says what it would send.
                webhooks=config.webhooks,
                rcon=config.rcon,
            )
            rehearsal = Rehearsal(
                services,
                definition,
                options,
                console,
                clock=clock,
                tick_interval_seconds=config.tick_interval_seconds,
                sleep=sleep,
                mirror_by_default=config.discord_events.mirror,
            )
            return await rehearsal.run()
        finally:
            await engine.dispose()


def _next_real_start(
    definition: EventDefinition, now: dt.datetime, config: Config
) -> tuple[dt.datetime, str]:
    """A scheduled event is rehearsed at its next real occurrence (its dates, its time zone's
    daylight saving), said in its zone, the config's and UTC; a one-off without a schedule
    starts now."""
    if definition.schedule is None:
        return now, ""
    upcoming = schedule.next_occurrences(definition, now, 1)
    if not upcoming:
        return now, ""
    starts = schedule.start_of(definition, upcoming[0]) or upcoming[0]
    zone = schedule.zone_of(definition)
    seen = [schedule.shown(starts, zone)]
    if config.timezone not in (zone, "UTC"):
        seen.append(schedule.shown(starts, config.timezone))
    return starts, f"It starts at its next occurrence: {' / '.join(seen)}."


# Who the run history says cancelled a leftover rehearsal run ("cancelled by rehearse --cancel").
CANCEL_ACTOR = Actor(None, "rehearse --cancel")
# Every run in flight in one database, however many: a rehearsal ticks them all.
IN_FLIGHT_LIMIT = 1_000_000


async def _database_is_idle(engine: AsyncEngine, console: Console, url: str) -> bool:
    """A rehearsal ticks every due run in its database; in one that holds runs in flight (the
    live bot's, or an interrupted rehearsal's) it would play those too, on the virtual clock."""
    busy = await views.list_runs(engine, in_flight_only=True, limit=IN_FLIGHT_LIMIT)
    if not busy:
        return True
    shown = masked_url(url)
    message = (
        f"{shown} has {len(busy)} run(s) in flight; a rehearsal would advance them too. "
        "Rehearse on a database of its own (or leave out --database for a temporary one)."
    )
    if all(run.rehearsal for run in busy):
        message += (
            " They are all rehearsal runs: `rehearse --database URL --resume` carries them on, "
            "`rehearse --database URL --cancel REASON` cancels them."
        )
    console.emit("error", message, message=message)
    return False


async def resume_rehearsals(
    options: RehearsalOptions,
    config: Config,
    *,
    stream: TextIO | None = None,
    sleep: Sleep = asyncio.sleep,
) -> int:
    """Carry on the rehearsal runs in flight in ``options.database_url`` (``rehearse --database
    URL --resume``); 0 only when every one of them completed. Refused, changing nothing, when
    the database has a live run in flight: the tick would advance it too."""
    assert options.database_url is not None, "only a kept database has runs to resume"
    url = options.database_url
    engine = create_engine(url)
    try:
        await upgrade(engine)
        busy = await views.list_runs(engine, in_flight_only=True, limit=IN_FLIGHT_LIMIT)
        last_log_ids: dict[int, int] = {}
        start = utcnow().replace(microsecond=0)
        for run in busy:
            for entry in await views.log_for_run(engine, run.id):
                last_log_ids[run.id] = max(last_log_ids.get(run.id, 0), entry.id)
                start = max(start, entry.at)
        # The interrupted rehearsal's virtual clock may have run days ahead of real time: carry
        # on from where it got to, so the runs' history never goes back in time.
        clock = ManualClock(start)
        console = Console(clock, as_json=options.as_json, stream=stream, verbose=options.verbose)
        if options.config_line:
            console.note(options.config_line)
        live = [run for run in busy if not run.rehearsal]
        if live:
            message = (
                f"{masked_url(url)} has {len(live)} live run(s) in flight; carrying on its rehearsals "
                "would advance them too. Never point rehearse at the live bot's database."
            )
            console.emit("error", message, message=message)
            return 1
        if not busy:
            console.note(f"{masked_url(url)} has no rehearsal runs in flight: nothing to resume")
            return 0
        services = assemble(
            engine,
            lambda _describe: ConsoleDelivery(console, config),
            clock=clock,
            settings=dataclasses.replace(REHEARSAL_SETTINGS, approve_from=config.approve_from),
            owner=ACTOR.name,
            webhooks=config.webhooks,
            rcon=config.rcon,
        )
        rehearsal = Rehearsal(
            services,
            None,
            options,
            console,
            clock=clock,
            tick_interval_seconds=config.tick_interval_seconds,
            sleep=sleep,
            mirror_by_default=config.discord_events.mirror,
        )
        return await rehearsal.carry_on(sorted(busy, key=lambda run: run.id), last_log_ids)
    finally:
        await engine.dispose()


async def cancel_rehearsals(
    engine: AsyncEngine, reason: str, *, as_json: bool = False, stream: TextIO | None = None
) -> int:
    """Cancel every rehearsal run in flight in ``engine``'s database through ``Controls.cancel``
    (``rehearse --database URL --cancel REASON``), with ``reason`` in each run's history; live
    runs are left alone. 0 when every one was cancelled (or there were none)."""
    clock = ManualClock(utcnow())
    console = Console(clock, as_json=as_json, stream=stream)
    busy = await views.list_runs(engine, in_flight_only=True, limit=IN_FLIGHT_LIMIT)
    rehearsals = sorted((run for run in busy if run.rehearsal), key=lambda run: run.id)
    if not rehearsals:
        console.note("no rehearsal runs in flight: nothing to cancel")
    controls = Controls(engine, clock=clock)
    failed = 0
    for run in rehearsals:
        result = await controls.cancel(run.id, reason=reason, actor=CANCEL_ACTOR)
        failed += not result.ok
        said = control_text(result)
        console.emit(
            "status" if result.ok else "error",
            f"{run_label(run.id, run.scope)}: {RunStatus.CANCELLED if result.ok else said}",
            run_id=run.id,
            scope=run.scope,
            to=RunStatus.CANCELLED if result.ok else None,
            message=said,
        )
    if len(busy) > len(rehearsals):
        console.note(f"left {len(busy) - len(rehearsals)} live run(s) alone")
    return 1 if failed else 0
