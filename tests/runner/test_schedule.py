"""Scheduled occurrences: cron in a named time zone across DST, materialised ahead of time, the
occurrence key making a second insert a no-op, and missed occurrences marked as such."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa

from actions import validation_registry
from actions.core import wait_action
from runner import catalog, views
from runner import definitions as defs
from runner.errors import UnknownDefinition
from runner.history import Actor
from runner.schedule import Upcoming, next_occurrences, occurrences, shown
from runner.schema import runs, versions
from tests.support.definitions import cron, event, phase, wait
from tests.support.world import World


def quiz(**over: Any) -> defs.EventDefinition:
    spec = event(
        "quiz-night",
        phase("main", wait(60)),
        title="Quiz night",
        schedule=cron("0 20 * * FRI", "Europe/London"),
        grace_seconds=600,
    )
    spec.update(over)
    return defs.validate(spec, validation_registry())


def test_cron_keeps_local_time_across_a_dst_change() -> None:
    """20:00 London is 19:00 UTC in summer and 20:00 UTC in winter (clocks went back on
    2026-10-25); a hand parser working in UTC would drift by an hour."""
    found = list(occurrences(quiz(), dt.datetime(2026, 10, 15), dt.datetime(2026, 11, 4)))
    assert found == [
        dt.datetime(2026, 10, 16, 19),
        dt.datetime(2026, 10, 23, 19),
        dt.datetime(2026, 10, 30, 20),
    ]


def test_once_yields_its_instant_in_utc_only_inside_the_window() -> None:
    # Far ahead: validation refuses a once that is already over.
    once = quiz(schedule={"once": "2099-12-05T19:00:00+01:00"})
    assert list(occurrences(once, dt.datetime(2099, 12, 1), dt.datetime(2099, 12, 6))) == [
        dt.datetime(2099, 12, 5, 18)
    ]
    assert list(occurrences(once, dt.datetime(2099, 12, 5, 18), dt.datetime(2099, 12, 6))) == []


async def count_runs(world: World) -> int:
    async with world.engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(runs))).scalar() or 0)


async def test_occurrences_are_materialised_ahead_and_only_once(world: World) -> None:
    world.register(wait_action(), owner="core")
    world.clock.set(dt.datetime(2026, 10, 15, 12))
    await catalog.publish(world.engine, quiz(scopes=["eu", "us"]), world.clock.now())
    report = await world.tick()
    assert report.materialised == 0, "the next Friday is more than a day away"

    world.clock.set(dt.datetime(2026, 10, 16, 9))
    report = await world.tick()
    assert report.materialised == 2, "one run per scope for Friday 20:00 London"
    async with world.engine.connect() as conn:
        rows = (await conn.execute(sa.select(runs.c.scope, runs.c.scheduled_for, runs.c.status))).all()
    assert sorted(rows) == [
        ("eu", dt.datetime(2026, 10, 16, 19), "scheduled"),
        ("us", dt.datetime(2026, 10, 16, 19), "scheduled"),
    ]

    # A fresh runner (restart) forgets nothing it needs: a second insert is a no-op.
    world.clock.set(dt.datetime(2026, 10, 16, 10))
    await world.set_definitions_materialised_until(None)
    await world.tick()
    assert await count_runs(world) == 2

    world.clock.set(dt.datetime(2026, 10, 16, 19, 0, 1))
    await world.tick()
    async with world.engine.connect() as conn:
        statuses = (await conn.execute(sa.select(runs.c.status))).scalars().all()
    assert statuses == ["running", "running"], "due occurrences start (their wait holds them running)"


async def test_an_occurrence_the_bot_was_down_for_is_marked_missed(world: World) -> None:
    world.clock.set(dt.datetime(2026, 10, 16, 9))
    await catalog.publish(world.engine, quiz(), world.clock.now())
    await world.tick()
    world.clock.set(dt.datetime(2026, 10, 16, 21))  # down from before 20:00 until 21:00; grace is 10 min
    report = await world.tick()
    assert report.missed == 1
    async with world.engine.connect() as conn:
        (status, error) = (await conn.execute(sa.select(runs.c.status, runs.c.last_error))).one()
    assert status == "missed" and "grace" in error


# ── What comes next, as people read it (issue 11) ─────────────────────────────


def test_next_occurrences_of_a_london_cron_keep_20_00_local_across_the_october_change() -> None:
    """The clocks go back on 2026-10-25: 20:00 London is 19:00 UTC before and 20:00 UTC after,
    and each is shown in the event's zone with the abbreviation of its date, beside UTC."""
    found = next_occurrences(quiz(), dt.datetime(2026, 10, 15), 3)
    assert found == [
        dt.datetime(2026, 10, 16, 19),
        dt.datetime(2026, 10, 23, 19),
        dt.datetime(2026, 10, 30, 20),
    ]
    assert [shown(moment, "Europe/London") for moment in found] == [
        "Fri 16 Oct 2026 20:00 BST (19:00 UTC)",
        "Fri 23 Oct 2026 20:00 BST (19:00 UTC)",
        "Fri 30 Oct 2026 20:00 GMT (20:00 UTC)",
    ]


def test_next_occurrences_start_strictly_after_the_moment_given() -> None:
    """An occurrence at ``after`` itself has begun: it is not "next"."""
    assert next_occurrences(quiz(), dt.datetime(2026, 10, 16, 19), 1) == [dt.datetime(2026, 10, 23, 19)]


def test_a_once_gives_its_instant_until_it_has_passed_and_a_manual_event_nothing() -> None:
    once = quiz(schedule={"once": "2099-12-05T19:00:00+01:00"})
    assert next_occurrences(once, dt.datetime(2099, 12, 1), 3) == [dt.datetime(2099, 12, 5, 18)]
    assert next_occurrences(once, dt.datetime(2099, 12, 5, 18), 3) == []
    manual = quiz(schedule="manual")
    assert next_occurrences(manual, dt.datetime(2026, 12, 1), 3) == []
    assert next_occurrences(quiz(), dt.datetime(2026, 12, 1), 0) == []


def test_a_cron_that_fires_once_in_four_years_is_still_found() -> None:
    """No window bounds the search: the next 29 February is two years off."""
    leap = quiz(schedule=cron("0 12 29 2 *", "UTC"))
    assert next_occurrences(leap, dt.datetime(2026, 3, 1), 2) == [
        dt.datetime(2028, 2, 29, 12),
        dt.datetime(2032, 2, 29, 12),
    ]


def test_an_instant_is_always_shown_with_its_zone() -> None:
    """UTC alone when the zone is UTC; the UTC day named when it is not the local one; a zone
    with no abbreviation (Istanbul's is a bare "+03") named by its IANA name."""
    moment = dt.datetime(2026, 12, 4, 20)
    assert shown(moment) == "Fri 4 Dec 2026 20:00 UTC"
    assert shown(moment, "Etc/UTC") == "Fri 4 Dec 2026 20:00 UTC"
    assert shown(moment, "Australia/Sydney") == "Sat 5 Dec 2026 07:00 AEDT (Fri 4 Dec 20:00 UTC)"
    assert shown(moment, "Europe/Istanbul") == "Fri 4 Dec 2026 23:00 Europe/Istanbul (20:00 UTC)"
    assert shown(dt.datetime(2026, 12, 4, 20, 0, 30)) == "Fri 4 Dec 2026 20:00:30 UTC"


async def test_upcoming_lists_created_runs_by_id_then_the_computed_ones_per_scope(world: World) -> None:
    """The runs the runner created (status scheduled) are listed with their ids, soonest first,
    then the occurrences it will create beyond them. A cancelled occurrence is not to come any
    more: it is neither listed nor computed again, and its scope shows the next three after it."""
    world.register(wait_action(), owner="core")
    world.clock.set(dt.datetime(2026, 10, 16, 9))
    await catalog.publish(world.engine, quiz(scopes=["eu", "us"]), world.clock.now())
    await catalog.publish(world.engine, quiz(key="by-hand", schedule="manual"), world.clock.now())
    await world.tick()
    async with world.engine.connect() as conn:
        created = dict((await conn.execute(sa.select(runs.c.scope, runs.c.id))).all())

    (event,) = await views.upcoming(world.engine, world.runner.versions, world.clock.now())
    assert (event.key, event.zone, event.scheduled) == ("quiz-night", "Europe/London", True)
    friday, next_friday, after_dst = (
        dt.datetime(2026, 10, 16, 19),
        dt.datetime(2026, 10, 23, 19),
        dt.datetime(2026, 10, 30, 20),
    )
    assert [(s.scope, s.occurrences) for s in event.scopes] == [
        (scope, [Upcoming(friday, created[scope]), Upcoming(next_friday), Upcoming(after_dst)])
        for scope in ("eu", "us")
    ]
    assert event.next_at == friday

    cancelled = await world.controls.cancel(created["eu"], reason="venue closed", actor=Actor(None, "test"))
    assert cancelled.ok
    (event,) = await views.upcoming(world.engine, world.runner.versions, world.clock.now())
    eu, us = event.scopes
    assert eu.occurrences == [
        Upcoming(next_friday),
        Upcoming(after_dst),
        Upcoming(dt.datetime(2026, 11, 6, 20)),
    ]
    assert us.occurrences[0] == Upcoming(friday, created["us"])


async def test_upcoming_for_one_event_names_a_manual_one_and_refuses_an_unknown_key(world: World) -> None:
    """Every scheduled event is listed without a key, a manual one only when asked for by name
    (with nothing to come), and a key nobody published is a clear error."""
    await catalog.publish(world.engine, quiz(key="by-hand", schedule="manual"), world.clock.now())
    assert await views.upcoming(world.engine, world.runner.versions, world.clock.now()) == []
    (manual,) = await views.upcoming(world.engine, world.runner.versions, world.clock.now(), key="by-hand")
    assert (manual.scheduled, manual.scopes, manual.next_at) == (False, [], None)
    with pytest.raises(UnknownDefinition, match="no published event is called 'nope'"):
        await views.upcoming(world.engine, world.runner.versions, world.clock.now(), key="nope")


async def test_the_event_list_carries_each_events_next_occurrence_and_its_zone(world: World) -> None:
    world.clock.set(dt.datetime(2026, 10, 15, 12))
    await catalog.publish(world.engine, quiz(), world.clock.now())
    await catalog.publish(world.engine, quiz(key="by-hand", schedule="manual"), world.clock.now())
    listed = await views.list_definitions(world.engine, world.runner.versions, now=world.clock.now())
    assert [(d.key, d.next_at, d.zone) for d in listed] == [
        ("by-hand", None, "UTC"),
        ("quiz-night", dt.datetime(2026, 10, 16, 19), "Europe/London"),
    ]
    without = await views.list_definitions(world.engine, world.runner.versions)
    assert [d.next_at for d in without] == [None, None], "only asked for with now"


async def test_an_unreadable_definition_is_listed_as_such_and_does_not_hide_the_others(world: World) -> None:
    """A stored version today's rules refuse (edited by hand, or from an older format) has no
    occurrences to show, since the runner leaves it alone; it is named with the reason, and every
    other event is still listed."""
    await catalog.publish(world.engine, quiz(), world.clock.now())
    broken = await catalog.publish(world.engine, quiz(key="broken"), world.clock.now())
    async with world.engine.begin() as conn:
        await conn.execute(
            sa.update(versions)
            .where(versions.c.definition_id == broken.definition_id)
            .values(spec={**quiz(key="broken").model_dump(mode="json"), "retired_field": 1})
        )
    fresh = catalog.VersionCache()
    listed = await views.upcoming(world.engine, fresh, world.clock.now())
    assert [(e.key, e.scheduled, bool(e.unreadable), e.next_at is None) for e in listed] == [
        ("broken", False, True, True),
        ("quiz-night", True, False, False),
    ]
    assert "retired_field" in (listed[0].unreadable or "")
