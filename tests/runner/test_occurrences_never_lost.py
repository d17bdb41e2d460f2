"""No scheduled occurrence is silently lost (defect 1 of issue 8, and 1b and 1c, found by the
model-based test): a materialise pass that stops at its budget resumes where it stopped, an
occurrence at the publishing instant counts, and publishing a new version keeps the occurrences
the old one had not reached. Each test is named for the defect it pins and runs on both
backends (the ``engine`` fixture); its docstring says what happened before and what must happen now."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa

from runner.schedule import MAX_OCCURRENCES_PER_PASS
from runner.schema import definitions, runs
from tests.support.definitions import cron as on_cron
from tests.support.definitions import event
from tests.support.world import T0, World, phase, step

MINUTE = dt.timedelta(minutes=1)


async def scheduled_runs(world: World) -> list[sa.Row[Any]]:
    async with world.engine.connect() as conn:
        query = sa.select(runs.c.scheduled_for, runs.c.status).order_by(runs.c.scheduled_for)
        return list((await conn.execute(query)).all())


async def materialised_until(world: World) -> dt.datetime | None:
    async with world.engine.connect() as conn:
        return (await conn.execute(sa.select(definitions.c.materialised_until))).scalar()


def often(cron: str, **over: Any) -> dict[str, Any]:
    """The one-step definition these tests schedule; ``over`` for a later version of it."""
    return event("often", phase("main", step("test.noop")), schedule=on_cron(cron), grace_seconds=120, **over)


async def publish_cron(world: World, cron: str) -> None:
    world.register(world.scripted.action("test.noop"))
    await world.publish(often(cron))


# ── Defect 1: silent loss of scheduled occurrences ───────────────────────────


@pytest.mark.slow
async def test_defect_01_a_15_minute_cron_ticked_for_48_hours_runs_every_occurrence(world: World) -> None:
    """Before: one materialise pass created at most 50 occurrences but recorded the whole 24 h
    lookahead as materialised, so a cron every 15 minutes ticked every 5 minutes for 48 h made
    146 runs instead of 192, with an 11 h 45 min gap nobody was told about. Now every occurrence
    becomes a run (and, ticked on time, completes): the 192 after publishing, and the one at
    the instant of publishing."""
    await publish_cron(world, "*/15 * * * *")
    end = T0 + dt.timedelta(hours=48)
    moment = T0
    while moment <= end:
        await world.tick(moment)
        moment += 5 * MINUTE

    due = [row for row in await scheduled_runs(world) if row.scheduled_for <= end]
    expected = [T0 + k * 15 * MINUTE for k in range(48 * 4 + 1)]
    assert [row.scheduled_for for row in due] == expected, "no occurrence may be dropped"
    assert {row.status for row in due} == {"completed"}


async def test_defect_01_a_5_minute_cron_keeps_running_after_its_first_50(world: World) -> None:
    """Before: a cron with more than 50 occurrences in the 24 h lookahead (the issue's
    every-minute cron; every 5 minutes, the most often a definition may now fire, has 288)
    produced 50 runs, then nothing for most of a day, because the bookkeeping jumped to the end
    of the lookahead. Now ``materialised_until`` only advances to the last occurrence actually
    created; the rest is picked up on the next pass, so every 5 minutes of ten hours has its
    run."""
    every = 5 * MINUTE
    await publish_cron(world, "*/5 * * * *")
    await world.tick(T0)
    # The first of the 50 is the occurrence at the instant of publishing.
    assert await materialised_until(world) == T0 + (MAX_OCCURRENCES_PER_PASS - 1) * every, (
        "a pass stopped by its cap records only as far as it reached"
    )
    ticks = 10 * 12
    for k in range(1, ticks + 1):
        await world.tick(T0 + k * every)

    done = [row for row in await scheduled_runs(world) if row.scheduled_for <= T0 + ticks * every]
    assert [row.scheduled_for for row in done] == [T0 + k * every for k in range(ticks + 1)]
    assert {row.status for row in done} == {"completed"}
    ahead = await materialised_until(world)
    assert ahead is not None and ahead >= T0 + ticks * every + dt.timedelta(hours=12), (
        "caught up: at least half the lookahead is worked out ahead, as for any definition"
    )


async def test_defect_01_an_occurrence_at_the_instant_of_publishing_is_not_dropped(world: World) -> None:
    """Before: occurrences were worked out after the publish instant, exclusive, so a cron that
    fell due at the very moment the definition was published was neither a run nor missed. Now
    the first pass includes it (and a second pass does not create it again)."""
    world.clock.set(T0 + 15 * MINUTE)
    await publish_cron(world, "*/15 * * * *")
    await world.tick()
    await world.tick(T0 + 20 * MINUTE)
    rows = await scheduled_runs(world)
    assert rows[0].scheduled_for == T0 + 15 * MINUTE
    assert rows[0].status == "completed"
    assert [row.scheduled_for for row in rows[:2]] == [T0 + 15 * MINUTE, T0 + 30 * MINUTE]


async def test_defect_01b_publishing_a_new_version_keeps_the_occurrences_the_old_one_had_not_reached(
    world: World,
) -> None:
    """Found by the model-based test. Before: publishing a new version reset the bookkeeping
    and worked occurrences out from the new version's publishing instant, so when the runner
    had not ticked for a while (the bot was down), every occurrence between the last one worked
    out and the publish was neither a run nor missed. Now those are created under the version
    that was in force at their moment (and marked missed, being past their grace), and the new
    version takes over from its publishing instant."""
    await publish_cron(world, "*/15 * * * *")
    await world.tick(T0)
    ahead = await materialised_until(world)
    assert ahead is not None
    # Down for two days, then a new version is published before the first tick.
    down_until = ahead + dt.timedelta(hours=24)
    world.clock.set(down_until)
    first_version = (await scheduled_version_ids(world))[0]
    await world.publish(often("*/15 * * * *", title="Often, renamed"))
    for _ in range(60):  # a pass creates at most 50: let it catch up
        await world.tick(down_until)

    rows = await scheduled_runs(world)
    moments = [row.scheduled_for for row in rows if row.scheduled_for <= down_until]
    expected = [T0 + k * 15 * MINUTE for k in range(int((down_until - T0) / (15 * MINUTE)) + 1)]
    assert moments == expected, "every occurrence of the downtime is a run"
    late = {row.status for row in rows if ahead < row.scheduled_for < down_until - 2 * MINUTE}
    assert late == {"missed"}, "past their grace: marked missed, never started late"
    versions_by_moment = dict(await scheduled_version_ids(world, with_moments=True))
    assert versions_by_moment[down_until - 15 * MINUTE] == first_version, (
        "an occurrence before the publish belongs to the version in force then"
    )
    assert versions_by_moment[down_until] != first_version, "the new version takes over at its publishing"


async def test_defect_01c_a_pass_after_a_publish_does_not_spend_its_budget_on_runs_that_exist(
    world: World,
) -> None:
    """Found by the model-based test. Before: after a new version, the next pass walked again
    the occurrences the old version had already created, and counted them against its budget of
    50, so a tick 13 hours on created nothing although two occurrences were due. Now only runs a
    pass really creates count, and every due occurrence is a run after one tick."""
    await publish_cron(world, "*/15 * * * *")
    await world.tick(T0)  # 50 occurrences: T0 to T0 + 12 h 15 min
    await world.publish(often("*/15 * * * *", title="Often, v2"))
    later_on = T0 + dt.timedelta(hours=13)
    await world.tick(later_on)
    moments = {row.scheduled_for for row in await scheduled_runs(world)}
    due = {T0 + k * 15 * MINUTE for k in range(13 * 4 + 1)}
    assert due <= moments, f"due occurrences left uncreated: {sorted(due - moments)[:3]}"


async def scheduled_version_ids(world: World, *, with_moments: bool = False) -> list[Any]:
    async with world.engine.connect() as conn:
        query = sa.select(runs.c.scheduled_for, runs.c.version_id).order_by(runs.c.scheduled_for)
        rows = (await conn.execute(query)).all()
    return [(r.scheduled_for, r.version_id) for r in rows] if with_moments else [r.version_id for r in rows]
