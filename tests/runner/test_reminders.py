"""Reminders (issue 11): durable steps of a scheduled run, sent before it starts.

What these pin: a reminder is created with its occurrence (never for a manual start or a
rehearsal), the run wakes at it through the one due query, it goes out once at start - lead
with its own idempotency key, one whose moment passed longer than the grace ago is skipped and
logged (never sent late), the start skips what is still pending, a cancel or a miss cancels them,
a failure never touches the run, a dead runner's lease is handed back without touching attempts,
and the lookahead creates a run early enough for its longest lead. Every test runs on SQLite and
MariaDB (the ``world`` fixture).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

from runner import catalog, views
from runner.definitions import REMINDER_ACTION, REMINDERS_PHASE
from runner.engine import RunnerSettings
from runner.history import Actor
from runner.schema import definitions, runs
from runner.states import RunStatus, StepStatus
from tests.support.definitions import event
from tests.support.world import T0, World, phase, step

# T0 is Wednesday 2026-09-02 12:00 UTC; the event runs daily at 20:00 UTC.
START = dt.datetime(2026, 9, 2, 20, 0)
HOUR = dt.timedelta(hours=1)
MINUTE = dt.timedelta(minutes=1)


def reminder(before: str, text: str, **more: Any) -> dict[str, Any]:
    return {"before": before, "channel": "announcements", "content": text, **more}


def nightly(key: str = "nightly", *, grace_seconds: int = 900, **fields: Any) -> dict[str, Any]:
    fields.setdefault(
        "reminders", [reminder("1h", "Starts {start_relative}"), reminder("15m", "Fifteen minutes")]
    )
    return event(
        key,
        phase("main", step("test.go", {})),
        schedule={"cron": "0 20 * * *", "timezone": "UTC"},
        grace_seconds=grace_seconds,
        **fields,
    )


def setup(world: World) -> None:
    world.register(world.scripted.action(REMINDER_ACTION), world.scripted.action("test.go"))


async def first_run(world: World) -> int:
    async with world.engine.connect() as conn:
        rows = (await conn.execute(sa.select(runs.c.id).order_by(runs.c.scheduled_for, runs.c.id))).all()
    assert rows, "the tick created no run"
    return int(rows[0].id)


async def reminders_of(world: World, run_id: int) -> list[Any]:
    return [s for s in await world.steps_of(run_id) if s["phase"] == REMINDERS_PHASE]


async def reminder_lines(world: World, run_id: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        (line["kind"], line["detail"] or {}) for line in await world.log(run_id) if "reminder" in line["kind"]
    ]


def sent(world: World) -> list[Any]:
    return world.scripted[REMINDER_ACTION].calls


async def test_reminders_are_sent_at_their_moments_once_each_with_their_own_key(world: World) -> None:
    """The run is created with its two reminders (start - 1h, start - 15m) and wakes at the
    first; each goes out at its moment, once, carrying its step's idempotency key, and the run
    stays scheduled until 20:00, when it starts and sends nothing more."""
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    run_id = await first_run(world)
    rows = await reminders_of(world, run_id)
    assert [(r["seq"], r["due_at"], r["status"]) for r in rows] == [
        (0, START - HOUR, "pending"),
        (1, START - 15 * MINUTE, "pending"),
    ]
    assert [r["label"] for r in rows] == ["Reminder, 1h before", "Reminder, 15m before"]
    assert (await world.run(run_id))["wake_at"] == START - HOUR

    await world.tick(START - HOUR - MINUTE)
    assert sent(world) == []
    await world.tick(START - HOUR)
    assert [c.idempotency_key for c in sent(world)] == [rows[0]["idempotency_key"]]
    assert sent(world)[0].params["content"] == "Starts {start_relative}"
    run = await world.run(run_id)
    assert (run["status"], run["wake_at"]) == ("scheduled", START - 15 * MINUTE)

    # An idle tick between the two costs the run nothing: it is not due.
    report = await world.tick(START - 30 * MINUTE)
    assert report.runs_advanced == 0 and len(sent(world)) == 1

    await world.tick(START - 15 * MINUTE)
    assert [c.idempotency_key for c in sent(world)] == [r["idempotency_key"] for r in rows]
    assert (await world.run(run_id))["wake_at"] == START
    await world.tick(START)
    assert len(sent(world)) == 2
    assert len(world.scripted["test.go"].calls) == 1
    assert (await world.run(run_id))["status"] == "completed"
    after = await reminders_of(world, run_id)
    assert [(r["status"], r["attempts"]) for r in after] == [("done", 1), ("done", 1)]
    kinds = [kind for kind, _ in await reminder_lines(world, run_id)]
    assert kinds == ["reminder.sent", "reminder.sent"]


async def test_a_reminder_past_its_grace_is_skipped_and_logged_never_sent_late(world: World) -> None:
    """The bot was down from 18:00 to 19:20: the 1h reminder's moment (19:00) is 20 minutes gone,
    past the 10-minute grace, so it is skipped with how late it was; the 15m one, a minute late
    at 19:46, is inside the grace and goes out."""
    setup(world)
    await world.publish(nightly(grace_seconds=600))
    await world.tick(T0)
    run_id = await first_run(world)
    await world.tick(START - 40 * MINUTE)
    assert sent(world) == []
    lines = await reminder_lines(world, run_id)
    assert lines == [("reminder.skipped", {"reason": "late", "before": 3600.0, "late_seconds": 1200.0})]
    await world.tick(START - 14 * MINUTE)
    assert len(sent(world)) == 1
    assert sent(world)[0].params["content"] == "Fifteen minutes"
    rows = await reminders_of(world, run_id)
    assert [r["status"] for r in rows] == ["skipped", "done"]
    kind, detail = (await reminder_lines(world, run_id))[-1]
    assert (kind, detail["late_seconds"]) == ("reminder.sent", 60.0)


async def test_the_start_skips_reminders_still_pending_in_its_transaction(world: World) -> None:
    """Nothing ticked between 12:00 and the start: at 20:00 the run starts, and both reminders
    (inside a generous grace) are skipped as "run started", never sent after the start."""
    setup(world)
    await world.publish(nightly(grace_seconds=3 * 3600))
    await world.tick(T0)
    run_id = await first_run(world)
    await world.tick(START)
    assert sent(world) == []
    assert [r["status"] for r in await reminders_of(world, run_id)] == ["skipped", "skipped"]
    assert [d["reason"] for _, d in await reminder_lines(world, run_id)] == ["run started", "run started"]
    assert (await world.run(run_id))["status"] == "completed"


async def test_cancel_of_a_scheduled_run_cancels_its_reminders(world: World) -> None:
    """``/event cancel`` on an upcoming occurrence: the run is cancelled with its pending
    reminders, and nothing is sent at their moments or at the start."""
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    run_id = await first_run(world)
    result = await world.controls.cancel(run_id, reason="venue closed", actor=Actor(None, "staff"))
    assert result.ok
    assert [r["status"] for r in await reminders_of(world, run_id)] == ["cancelled", "cancelled"]
    for at in (START - HOUR, START - 15 * MINUTE, START):
        await world.tick(at)
    assert sent(world) == [] and world.scripted["test.go"].calls == []
    assert (await world.run(run_id))["status"] == "cancelled"


async def test_a_missed_occurrence_sends_no_reminder(world: World) -> None:
    """Down from 12:00 until past the start's grace: the run is marked missed before anything
    is advanced, which cancels its reminders; none goes out."""
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    run_id = await first_run(world)
    await world.tick(START + 16 * MINUTE)
    assert (await world.run(run_id))["status"] == "missed"
    assert [r["status"] for r in await reminders_of(world, run_id)] == ["cancelled", "cancelled"]
    assert sent(world) == []


async def test_a_failing_reminder_retries_then_fails_and_never_touches_the_run(world: World) -> None:
    """A reminder whose channel keeps failing is retried with the usual backoff up to
    max_attempts, then failed and logged; the run stays ok, scheduled, and starts on time."""
    setup(world)
    world.scripted[REMINDER_ACTION].answer = {"ok": False, "error": "discord is down"}
    await world.publish(nightly(reminders=[reminder("1h", "soon")]))
    await world.tick(T0)
    run_id = await first_run(world)
    at = START - HOUR
    for _ in range(3):
        await world.tick(at)
        at += dt.timedelta(seconds=world.runner.settings.retry_seconds)
    assert len(sent(world)) == 3
    assert len({c.idempotency_key for c in sent(world)}) == 1
    (row,) = await reminders_of(world, run_id)
    assert (row["status"], row["attempts"]) == ("failed", 3)
    run = await world.run(run_id)
    assert (run["status"], run["health"], run["wake_at"]) == ("scheduled", "ok", START)
    assert [k for k, _ in await reminder_lines(world, run_id)] == ["reminder.failed"]
    await world.tick(START)
    assert (await world.run(run_id))["status"] == "completed"


async def test_manual_starts_and_rehearsals_have_no_reminders(world: World) -> None:
    """Reminders belong to occurrences of the schedule: a manual start or a rehearsal of the
    same event gets none (and wakes at its start)."""
    setup(world)
    published = await world.publish(nightly())
    async with world.engine.begin() as conn:
        current = await catalog.current(conn, published.key, world.runner.versions)
        rehearsal = await catalog.create_run(conn, current, "", START, T0, rehearsal=True)
        manual = await catalog.create_run(conn, current, "", T0, T0, manual=True)
    assert rehearsal is not None and manual is not None
    for run_id in (rehearsal, manual):
        assert await reminders_of(world, run_id) == []
    assert (await world.run(rehearsal))["wake_at"] == START


async def test_a_dead_runners_reminder_lease_is_handed_back_and_sent_again_with_the_same_key(
    world: World,
) -> None:
    """A runner claimed the 1h reminder and died before settling it (the run is still
    scheduled). The reclaim hands it back without touching attempts, and the next visit sends it
    with the same key, counting the second attempt."""
    setup(world)
    await world.publish(nightly(reminders=[reminder("1h", "soon")]))
    await world.tick(T0)
    run_id = await first_run(world)
    (row,) = await reminders_of(world, run_id)
    world.clock.set(START - HOUR + 5 * MINUTE)
    await world.set_step(
        row["id"],
        status=StepStatus.RUNNING,
        attempts=1,
        claimed_by="dead:runner",
        claim_expires_at=START - HOUR + MINUTE,
        started_at=START - HOUR,
    )
    await world.set_run(run_id, wake_at=START)
    report = await world.tick()
    assert report.reclaimed == 1
    (after,) = await reminders_of(world, run_id)
    assert (after["status"], after["attempts"]) == ("done", 2)
    assert [c.idempotency_key for c in sent(world)] == [row["idempotency_key"]]
    assert [k for k, _ in await reminder_lines(world, run_id)] == ["reminder.sent"]
    assert (await world.run(run_id))["status"] == "scheduled"


async def test_a_reminder_handed_back_after_its_run_started_is_skipped(world: World) -> None:
    """The runner died holding a reminder and the run started meanwhile (the start skips only
    pending reminders): the reclaim skips it rather than leave it pending or send it late."""
    setup(world)
    await world.publish(nightly(reminders=[reminder("1h", "soon")], grace_seconds=7200))
    await world.tick(T0)
    run_id = await first_run(world)
    (row,) = await reminders_of(world, run_id)
    await world.set_step(
        row["id"], status=StepStatus.RUNNING, attempts=1, claimed_by="dead:runner", claim_expires_at=START
    )
    await world.tick(START + MINUTE)
    (after,) = await reminders_of(world, run_id)
    assert (after["status"], after["attempts"]) == ("skipped", 1)
    assert sent(world) == []
    assert [d.get("reason") for _, d in await reminder_lines(world, run_id)] == ["run started"]


async def test_a_reminder_a_day_and_a_half_ahead_has_its_run_created_in_time(engine: Any) -> None:
    """A Saturday event with a 36-hour reminder: the 24-hour lookahead alone would create the
    run 12 hours after the reminder's moment. Materialised hour by hour, the run exists before
    that moment and the reminder goes out at it."""
    world = World(engine)
    setup(world)
    saturday = dt.datetime(2026, 9, 5, 20, 0)
    spec = nightly(reminders=[reminder("36h", "Saturday night!")])
    spec["schedule"] = {"cron": "0 20 * * 6", "timezone": "UTC"}
    await world.publish(spec)
    moment = saturday - dt.timedelta(hours=36)
    at = T0
    while at < moment:
        await world.tick(at)
        at += HOUR
    await world.tick(moment)
    assert len(sent(world)) == 1
    assert sent(world)[0].params["content"] == "Saturday night!"


async def test_a_mirrored_definition_is_materialised_as_far_as_the_listing_horizon(engine: Any) -> None:
    """The Discord mirror lists a week ahead: a mirrored definition has a week of runs, one that
    is not mirrored only the lookahead's day."""
    world = World(engine, settings=RunnerSettings(listing_horizon_seconds=7 * 86400))
    setup(world)
    await world.publish(nightly("mirrored", reminders=[], discord_event=True, duration="1h"))
    await world.publish(nightly("plain", reminders=[]))
    await world.tick(T0)
    query = (
        sa.select(definitions.c.key, sa.func.count())
        .join(runs, runs.c.definition_id == definitions.c.id)
        .group_by(definitions.c.key)
    )
    async with world.engine.connect() as conn:
        counts = {key: int(n) for key, n in (await conn.execute(query)).all()}
    assert counts == {"mirrored": 7, "plain": 1}


async def test_a_run_without_reminders_is_still_found_at_its_start(world: World) -> None:
    """The due query no longer insists on ``scheduled_for <= now``: a plain scheduled run's wake
    is its start, and it is neither visited before nor missed at it."""
    setup(world)
    await world.publish(nightly(reminders=[]))
    await world.tick(T0)
    run_id = await first_run(world)
    assert (await world.run(run_id))["wake_at"] == START
    report = await world.tick(START - MINUTE)
    assert report.runs_advanced == 0
    await world.tick(START)
    assert (await world.run(run_id))["status"] == RunStatus.COMPLETED


async def test_a_new_version_repoints_upcoming_runs_and_rebuilds_their_reminders(world: World) -> None:
    """Published again with a 30-minute reminder instead of the 1h and 15m ones and another
    first step: tonight's occurrence (not started) follows version 2, with its never-claimed
    steps and reminders rebuilt from it, and wakes at its new reminder; the old ones are gone."""
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    run_id = await first_run(world)
    v2 = nightly(reminders=[reminder("30m", "half an hour")])
    v2["phases"] = [phase("main", step("test.go", {"n": 2}), step("test.go", {"n": 3}))]
    published = await world.publish(v2)
    run = await world.run(run_id)
    assert (run["version_id"], run["status"], run["wake_at"]) == (
        published.version_id,
        "scheduled",
        START - 30 * MINUTE,
    )
    main = [s for s in await world.steps_of(run_id) if s["phase"] == "main"]
    assert [s["params"] for s in main] == [{"n": 2}, {"n": 3}]
    assert [(r["seq"], r["due_at"]) for r in await reminders_of(world, run_id)] == [(0, START - 30 * MINUTE)]
    assert "run.repointed" in await world.kinds(run_id)
    await world.tick(START - HOUR)
    assert sent(world) == []
    await world.tick(START - 30 * MINUTE)
    assert [c.params["content"] for c in sent(world)] == ["half an hour"]
    await world.tick(START)
    assert [c.params for c in world.scripted["test.go"].calls] == [{"n": 2}, {"n": 3}]


async def test_a_new_version_cancels_an_upcoming_run_its_schedule_no_longer_has(world: World) -> None:
    """Moved from 20:00 to 21:00: tonight's 20:00 occurrence is cancelled with a reason (and its
    reminders with it), and the next tick creates the 21:00 one under version 2."""
    setup(world)
    await world.publish(nightly())
    await world.tick(T0)
    run_id = await first_run(world)
    moved = nightly()
    moved["schedule"] = {"cron": "0 21 * * *", "timezone": "UTC"}
    published = await world.publish(moved)
    run = await world.run(run_id)
    assert run["status"] == "cancelled" and "version 2" in run["last_error"]
    assert [r["status"] for r in await reminders_of(world, run_id)] == ["cancelled", "cancelled"]
    await world.tick(T0 + MINUTE)
    async with world.engine.connect() as conn:
        rows = (await conn.execute(sa.select(runs.c.scheduled_for, runs.c.version_id, runs.c.status))).all()
    assert (START + HOUR, published.version_id, "scheduled") in [tuple(r) for r in rows]
    await world.tick(START - HOUR)
    assert sent(world) == [], "the cancelled occurrence's 1h reminder is not sent"
    await world.tick(START)
    # 20:00 is the 21:00 occurrence's 1h reminder.
    assert [c.run_id for c in sent(world)] != [] and run_id not in {c.run_id for c in sent(world)}


async def test_a_started_run_keeps_its_version_when_a_new_one_is_published(world: World) -> None:
    """Only runs not yet started follow a new version: one under way keeps the version it
    started with, and a reminder already sent stays sent."""
    setup(world)
    world.scripted["test.go"].answer = {"ok": True, "await": "human"}
    first = await world.publish(nightly())
    await world.tick(T0)
    run_id = await first_run(world)
    await world.tick(START)
    assert (await world.run(run_id))["status"] == "running"
    await world.publish(nightly(reminders=[reminder("30m", "half an hour")]))
    assert (await world.run(run_id))["version_id"] == first.version_id


async def test_a_runs_reminders_are_shown_beside_its_phases_not_as_one(world: World) -> None:
    """The run view's phases are the definition's only (so "phase N of M" never counts the
    reminders); ``reminders_of_run`` lists them with their moments and what became of them."""
    setup(world)
    await world.publish(nightly(grace_seconds=600))
    await world.tick(T0)
    run_id = await first_run(world)
    await world.tick(START - 40 * MINUTE)
    view = await views.run_view(world.engine, run_id, world.runner.versions)
    assert view is not None and [p.key for p in view.phases] == ["main"]
    shown = await views.reminders_of_run(world.engine, run_id)
    assert [(r.label, r.due_at, r.status) for r in shown] == [
        ("Reminder, 1h before", START - HOUR, "skipped"),
        ("Reminder, 15m before", START - 15 * MINUTE, "pending"),
    ]
    assert shown[0].note is not None and "late" in shown[0].note
