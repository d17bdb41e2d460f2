"""One date of a recurring event (issue 28 item 2): a ``skip`` or ``moves`` entry in a new
version of the cron schedule. What these pin: the skipped date gets no run and the run already
booked for it is cancelled; a moved date is booked once, at its new time, whether its run
existed before the move or not; the run already booked keeps its id (so its sign-ups and its
messages follow) and its reminders are rebuilt for the new start; the move is in the run's
history for the staff log; and the model refuses exceptions that name no occurrence. Every
test runs on SQLite and MariaDB (the ``world`` fixture).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from runner import schedule
from runner.definitions import REMINDER_ACTION, REMINDERS_PHASE, EventDefinition
from runner.schema import runs
from tests.support.definitions import event
from tests.support.world import T0, World, phase, step

# T0 is Wednesday 2026-09-02 12:00 UTC; the event runs daily at 20:00 Europe/London (19:00 UTC).
TODAY = dt.datetime(2026, 9, 2, 19, 0)
DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)


def nightly(**dates: Any) -> dict[str, Any]:
    return event(
        "nightly",
        phase("main", step("test.go", {})),
        schedule={"cron": "0 20 * * *", "timezone": "Europe/London", **dates},
        reminders=[{"before": "1h", "channel": "announcements", "content": "soon"}],
    )


def setup(world: World) -> None:
    world.register(world.scripted.action(REMINDER_ACTION), world.scripted.action("test.go"))


async def all_runs(world: World) -> list[sa.Row[Any]]:
    async with world.engine.connect() as conn:
        query = sa.select(runs.c.id, runs.c.scheduled_for, runs.c.occurrence_at, runs.c.status)
        return list((await conn.execute(query.order_by(runs.c.scheduled_for, runs.c.id))).all())


async def test_skipping_a_date_cancels_its_booked_run_and_books_nothing_then(world: World) -> None:
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    ((run_id, start, _, status),) = await all_runs(world)
    assert (start, status) == (TODAY, "scheduled")

    await world.publish(nightly(skip=["2026-09-02"]))
    for at in (T0, TODAY - HOUR, TODAY, TODAY + 12 * HOUR):
        await world.tick(at)

    rows = await all_runs(world)
    assert [(r.id, r.status) for r in rows if r.scheduled_for == TODAY] == [(run_id, "cancelled")]
    assert [r.scheduled_for for r in rows if r.status != "cancelled"] == [TODAY + DAY]
    assert world.scripted["test.go"].calls == [], "nothing ran on the skipped date"


async def test_moving_a_booked_date_keeps_its_run_and_rebuilds_its_reminders(world: World) -> None:
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    ((run_id, *_),) = await all_runs(world)

    # 22:30 London is 21:30 UTC.
    await world.publish(nightly(moves={"2026-09-02": "2026-09-02 22:30"}))
    for at in (T0, TODAY - HOUR, TODAY, TODAY + HOUR):
        await world.tick(at)

    moved = TODAY + 2 * HOUR + dt.timedelta(minutes=30)
    today = [r for r in await all_runs(world) if r.scheduled_for < TODAY + 12 * HOUR]
    assert [(r.id, r.scheduled_for, r.occurrence_at, r.status) for r in today] == [
        (run_id, moved, TODAY, "scheduled")
    ], "one run, the same one, at the new time; nothing booked at the old time"
    assert world.scripted["test.go"].calls == []
    reminders = [s for s in await world.steps_of(run_id) if s["phase"] == REMINDERS_PHASE]
    assert [s["due_at"] for s in reminders if s["status"] == "pending"] == [moved - HOUR]
    assert world.scripted[REMINDER_ACTION].calls == [], "the old reminder moment sent nothing"
    log = {line["kind"]: line["detail"] for line in await world.log(run_id)}
    assert "run.moved" in log and log["run.moved"]["version"] == 2

    await world.tick(moved - HOUR)
    assert len(world.scripted[REMINDER_ACTION].calls) == 1, "the reminder fires relative to the new time"
    await world.tick(moved)
    assert (await world.run(run_id))["status"] == "completed"


async def test_a_date_moved_before_its_run_exists_is_booked_once_at_the_new_time(world: World) -> None:
    setup(world)
    # Saturday's 20:00 moves to Sunday 10:00 (09:00 UTC); Sunday keeps its own 20:00.
    await world.publish(nightly(moves={"2026-09-05": "2026-09-06 10:00"}))
    at = T0
    while at < T0 + 6 * DAY:
        await world.tick(at)
        at += 6 * HOUR

    starts = [r.scheduled_for for r in await all_runs(world) if r.status != "cancelled"]
    sunday_morning = dt.datetime(2026, 9, 6, 9, 0)
    assert sunday_morning in starts
    assert dt.datetime(2026, 9, 5, 19, 0) not in starts
    assert starts.count(sunday_morning) == 1
    assert dt.datetime(2026, 9, 6, 19, 0) in starts


async def test_taking_a_move_back_returns_the_same_run_to_its_own_time(world: World) -> None:
    setup(world)
    await world.publish(nightly(moves={"2026-09-02": "2026-09-02 22:30"}))
    await world.tick(T0)
    ((run_id, *_),) = await all_runs(world)
    await world.publish(nightly())
    await world.tick(T0)
    rows = [r for r in await all_runs(world) if r.scheduled_for < TODAY + 12 * HOUR]
    assert [(r.id, r.scheduled_for, r.status) for r in rows] == [(run_id, TODAY, "scheduled")]


def test_the_schedule_lists_moved_dates_at_their_new_time_and_leaves_skipped_ones_out() -> None:
    definition = EventDefinition.model_validate(
        nightly(skip=["2026-09-03"], moves={"2026-09-04": "2026-09-04 08:00"})
    )
    found = schedule.next_occurrences(definition, T0, 4)
    assert found == [TODAY, dt.datetime(2026, 9, 4, 7, 0), TODAY + 3 * DAY, TODAY + 4 * DAY]


@pytest.mark.parametrize(
    ("dates", "words"),
    [
        ({"skip": ["2026-09-02", "2026-09-02"]}, "twice"),
        ({"skip": ["2026-09-02"], "moves": {"2026-09-02": "2026-09-03 10:00"}}, "both skipped and moved"),
        ({"moves": {"2026-09-02": "2026-09-03 20:00"}}, "an occurrence it already has"),
    ],
)
def test_refused_date_exceptions_name_the_date(dates: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EventDefinition.model_validate(nightly(**dates))
    assert words in str(caught.value)
    assert "2026-09-0" in str(caught.value)


def test_a_skip_on_a_day_the_cron_does_not_fire_is_refused() -> None:
    weekly = nightly()
    weekly["schedule"] = {"cron": "0 20 * * FRI", "timezone": "UTC", "skip": ["2026-09-03"]}
    with pytest.raises(ValidationError, match=r"no occurrence on 2026-09-03 \(Thu\)"):
        EventDefinition.model_validate(weekly)


def test_a_schedule_without_exceptions_hashes_as_before() -> None:
    plain = EventDefinition.model_validate(nightly())
    stored = '"schedule":{"cron":"0 20 * * *","kind":"cron","timezone":"Europe/London"}'
    assert stored in plain.canonical_json()


def test_upcoming_marks_moved_dates_and_lists_skipped_ones_between() -> None:
    definition = EventDefinition.model_validate(
        nightly(skip=["2026-09-03"], moves={"2026-09-04": "2026-09-04 08:00"})
    )
    ((scope,),) = [[s for s in schedule.upcoming_by_scope(definition, [], None, T0, 3)]]
    assert [(o.at, o.moved_from, o.skipped) for o in scope.occurrences] == [
        (TODAY, None, False),
        (TODAY + DAY, None, True),
        (dt.datetime(2026, 9, 4, 7, 0), TODAY + 2 * DAY, False),
        (TODAY + 3 * DAY, None, False),
    ]
