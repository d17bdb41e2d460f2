"""One definition of every run-log kind and one reader: what is written reads back as the same
typed event, a line written before this code (or by a newer one, or by hand) reads as a generic
event rather than raising, and the stored JSON keeps the keys the log always had."""

from __future__ import annotations

import datetime as dt

import pytest

from runner.history import (
    Entry,
    GenericEvent,
    Kind,
    RunStalled,
    RunStatusChanged,
    StallReason,
    StepConfirmed,
    StepDone,
    parse_event,
)
from runner.states import Health, RunStatus
from tests.support.world import World, phase, step

AT = dt.datetime(2026, 3, 1, 12, 0)


def _row(kind: str, detail: object, **extra: object) -> dict[str, object]:
    return {"id": 7, "run_id": 3, "step_id": None, "at": AT, "kind": kind, "detail": detail, **extra}


def test_a_run_status_line_keeps_its_stored_keys_and_reads_back_as_the_same_event() -> None:
    event = RunStatusChanged(RunStatus.PAUSED, from_=RunStatus.RUNNING, control="pause")
    assert event.detail() == {"to": "paused", "from": "running", "control": "pause"}
    assert parse_event(Kind.RUN_STATUS, event.detail()) == event


def test_datetimes_and_enums_are_stored_as_text_and_read_back_typed() -> None:
    event = RunStalled(StallReason.OVERDUE, Health.DEGRADED, wake_at=AT, overdue_seconds=720.0)
    assert event.detail() == {
        "reason": "overdue",
        "from": "degraded",
        "wake_at": AT.isoformat(),
        "overdue_seconds": 720.0,
    }
    back = parse_event("run.stalled", event.detail())
    assert back == event and isinstance(back, RunStalled) and back.wake_at == AT
    done = StepDone("announce", 1, hold_until=AT)
    assert parse_event("step.done", done.detail()) == done


def test_a_field_that_is_always_there_is_stored_even_when_empty() -> None:
    assert StepConfirmed(None).detail() == {"note": None}
    assert parse_event("step.confirmed", {"note": None}) == StepConfirmed(None)


@pytest.mark.parametrize(
    ("kind", "detail"),
    [
        ("run.teleported", {"to": "mars"}),  # a kind this code never heard of
        ("run.status", {"to": "running", "colour": "blue"}),  # a field it does not know
        ("run.status", {"to": "levitating"}),  # a status it does not know
        ("step.done", {"action": "announce"}),  # a field it needs is missing
        ("run.stalled", {"reason": "overdue", "from": "ok", "wake_at": "not a time"}),
        ("step.retry", ["a", "list"]),  # not an object at all
    ],
)
def test_an_old_or_unknown_line_reads_as_a_generic_event_and_never_raises(kind: str, detail: object) -> None:
    entry = Entry.from_row(_row(kind, detail))
    assert isinstance(entry.event, GenericEvent)
    assert entry.kind == entry.event.kind == kind
    assert entry.detail == (detail if isinstance(detail, dict) else {"value": detail})


def test_a_line_with_no_detail_reads() -> None:
    entry = Entry.from_row(_row("phase.started", None))
    assert isinstance(entry.event, GenericEvent) and entry.detail == {}
    assert Entry.from_row(
        _row("run.status", {"to": "completed", "from": "ending"})
    ).event == RunStatusChanged(RunStatus.COMPLETED, from_=RunStatus.ENDING)


def test_every_kind_has_one_event_class() -> None:
    from runner.history import events

    assert {cls.KIND for cls in events._BY_KIND.values()} == set(Kind)


async def test_record_and_the_reader_round_trip_the_actor_and_the_event(world: World) -> None:
    """What ``record`` writes, ``entries_for_run`` / ``entries_followed`` read back: the typed
    event, and the actor as an id and a name (no "name (id)" string to take apart)."""
    from runner.history import Actor, StepSkipped, entries_followed, entries_for_run, record
    from runner.sql.run_log import LogFollower

    run_id = await world.seed_run([phase("main", step("test.noop"))])
    ana = Actor("123456789012345678", "ana")
    async with world.engine.begin() as conn:
        await record(conn, run_id, StepSkipped("not needed"), AT, actor=ana)
        await record(conn, run_id, RunStatusChanged(RunStatus.PAUSED, from_=RunStatus.RUNNING), AT)
    async with world.engine.connect() as conn:
        mine = (await entries_for_run(conn, run_id))[-2:]
        after, _more = await entries_followed(conn, LogFollower(mine[0].id - 1))
    assert [(e.kind, e.actor, e.event) for e in mine] == [
        ("step.skipped", ana, StepSkipped("not needed")),
        ("run.status", None, RunStatusChanged(RunStatus.PAUSED, from_=RunStatus.RUNNING)),
    ]
    assert [e.id for e in after] == [e.id for e in mine]
