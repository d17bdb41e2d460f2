"""The statements that decide ownership, against the server: ported from seed
``eventRunnerSql.test.js`` and run on SQLite and on a real MariaDB, through the same engine
factory production uses (no client flag differs).

What a stub cannot prove lives here: SQLAlchemy's MySQL dialects connect with
``CLIENT_FOUND_ROWS``, so ``rowcount`` is the number of rows *matched*. The seed's connector
defect (a no-op UPDATE reporting 1) is guarded by every CAS moving the column it guards on; each
test below proves the loser of its race is told 0.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runner.db import insert_ignore
from runner.history import Actor
from runner.schema import definitions, runs, steps, versions
from runner.sql import run_leases, step_leases, step_settles
from runner.sql import runs as runs_sql
from runner.sql import steps as steps_sql
from tests.support.world import T0, later

ONE_YEAR_MS = 365 * 24 * 3600 * 1000


async def seed_definition(conn: AsyncConnection, grace_seconds: int = 900) -> tuple[int, int]:
    count = (await conn.execute(sa.select(sa.func.count()).select_from(definitions))).scalar()
    definition_id = (
        await conn.execute(
            sa.insert(definitions).values(
                key=f"d{count}", title="d", grace_seconds=grace_seconds, created_at=T0, updated_at=T0
            )
        )
    ).inserted_primary_key[0]
    version_id = (
        await conn.execute(
            sa.insert(versions).values(
                definition_id=definition_id, version=1, content_hash="0" * 64, spec={}, published_at=T0
            )
        )
    ).inserted_primary_key[0]
    return int(definition_id), int(version_id)


async def seed_occurrence(conn: AsyncConnection) -> dict[str, Any]:
    """A fresh definition's occurrence at T0: every ``runs_sql.insert`` argument but the scope."""
    definition_id, version_id = await seed_definition(conn)
    return {
        "definition_id": definition_id,
        "version_id": version_id,
        "scheduled_for": T0,
        "concurrency_key": None,
        "now": T0,
    }


async def seed_run(engine: AsyncEngine, **over: Any) -> int:
    async with engine.begin() as conn:
        definition_id, version_id = await seed_definition(conn, over.pop("grace_seconds", 900))
        values = {
            "definition_id": definition_id,
            "version_id": version_id,
            "scope": "",
            "status": "scheduled",
            "scheduled_for": T0,
            "created_at": T0,
            "updated_at": T0,
            **over,
        }
        return int((await conn.execute(sa.insert(runs).values(**values))).inserted_primary_key[0])


_keys = iter(range(10**6))


async def seed_step(engine: AsyncEngine, run_id: int, **over: Any) -> int:
    values = {
        "run_id": run_id,
        "phase": "main",
        "seq": 0,
        "action_id": "test.noop",
        "status": "pending",
        "attempts": 0,
        "idempotency_key": f"{next(_keys):040d}",
        "created_at": T0,
        "updated_at": T0,
        **over,
    }
    async with engine.begin() as conn:
        return int((await conn.execute(sa.insert(steps).values(**values))).inserted_primary_key[0])


async def run_row(engine: AsyncEngine, run_id: int) -> sa.RowMapping:
    async with engine.connect() as conn:
        row = await runs_sql.get(conn, run_id)
    assert row is not None
    return row


async def step_row(engine: AsyncEngine, step_id: int) -> sa.RowMapping:
    async with engine.connect() as conn:
        row = await steps_sql.get(conn, step_id)
    assert row is not None
    return row


# ── claimStart: exactly one winner ─────────────────────────────────────────


async def test_claim_start_the_first_caller_wins_and_every_other_gets_zero(engine: AsyncEngine) -> None:
    """``scheduled -> starting``: the winner is told 1, the loser 0 (not 1 with found rows)."""
    run_id = await seed_run(engine)
    async with engine.begin() as conn:
        first = await run_leases.claim_start(conn, run_id, "host:1", later(60_000), T0)
    async with engine.begin() as conn:
        second = await run_leases.claim_start(conn, run_id, "host:2", later(60_000), T0)
    assert (first, second) == (True, False)
    row = await run_row(engine, run_id)
    assert row["claimed_by"] == "host:1"
    assert row["status"] == "starting"


async def test_claim_start_stamps_started_at_once_and_never_moves_it(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine)
    async with engine.begin() as conn:
        await run_leases.claim_start(conn, run_id, "host:1", later(60_000), T0)
    first = (await run_row(engine, run_id))["started_at"]
    assert first == T0, "microseconds and all: DATETIME(6), from Python's clock"
    async with engine.begin() as conn:
        await conn.execute(
            sa.update(runs).where(runs.c.id == run_id).values(status="scheduled", concurrency_slot=None)
        )
        await run_leases.claim_start(conn, run_id, "host:2", later(60_000), later(5_000))
    assert (await run_row(engine, run_id))["started_at"] == first, "COALESCE keeps the original instant"


async def test_datetimes_keep_their_microseconds(engine: AsyncEngine) -> None:
    """A plain DATETIME on MariaDB truncates to the second; "due at .4" and "now is .9" must
    not compare equal."""
    precise = T0 + dt.timedelta(microseconds=400_123)
    run_id = await seed_run(engine, scheduled_for=precise)
    assert (await run_row(engine, run_id))["scheduled_for"] == precise


# ── claimTick: a live lease refuses even its own holder ────────────────────


async def test_claim_tick_a_live_lease_is_not_reenterable_by_its_holder(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running", claimed_by="host:1", claim_expires_at=later(60_000))
    async with engine.begin() as conn:
        again = await run_leases.claim_tick(conn, run_id, "host:1", later(120_000), T0)
    assert again is False, "a tick that overran must not advance its own run twice"


async def test_claim_tick_an_expired_lease_is_takeable_by_anyone_and_only_once(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running", claimed_by="host:1", claim_expires_at=later(-60_000))
    async with engine.begin() as conn:
        taken = await run_leases.claim_tick(conn, run_id, "host:2", later(60_000), T0)
    async with engine.begin() as conn:
        second = await run_leases.claim_tick(conn, run_id, "host:3", later(60_000), T0)
    assert (taken, second) == (True, False), "the winner's new lease is live: the loser matches nothing"
    assert (await run_row(engine, run_id))["claimed_by"] == "host:2"


async def test_claim_tick_a_paused_run_is_never_claimable(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="paused")
    async with engine.begin() as conn:
        assert await run_leases.claim_tick(conn, run_id, "host:1", later(60_000), T0) is False


# ── transition: the guard is the whole point ───────────────────────────────


async def test_transition_a_run_cancelled_underneath_the_tick_is_not_transitioned(
    engine: AsyncEngine,
) -> None:
    run_id = await seed_run(engine, status="running")
    async with engine.begin() as conn:
        await conn.execute(sa.update(runs).where(runs.c.id == run_id).values(status="cancelled"))
        moved = await runs_sql.transition(conn, run_id, "running", "completed", T0, phase="main")
    assert moved is False
    assert (await run_row(engine, run_id))["status"] == "cancelled"


async def test_transition_running_to_running_is_a_guarded_write_not_a_noop(engine: AsyncEngine) -> None:
    """How the runner moves ``current_phase``: "still running" is the answer wanted, and a
    matched-rows count of 1 says so."""
    run_id = await seed_run(engine, status="running", current_phase="opening")
    async with engine.begin() as conn:
        moved = await runs_sql.transition(conn, run_id, "running", "running", T0, phase="closing")
    assert moved is True
    assert (await run_row(engine, run_id))["current_phase"] == "closing"


async def test_transition_to_a_terminal_status_frees_lease_slot_and_wake(engine: AsyncEngine) -> None:
    run_id = await seed_run(
        engine,
        status="running",
        claimed_by="h",
        claim_expires_at=later(1000),
        concurrency_slot="k",
        wake_at=T0,
    )
    async with engine.begin() as conn:
        assert await runs_sql.transition(conn, run_id, "running", "failed", later(5))
        assert await runs_sql.transition(conn, run_id, "running", "failed", later(6)) is False
    row = await run_row(engine, run_id)
    assert (row["claimed_by"], row["claim_expires_at"], row["concurrency_slot"], row["wake_at"]) == (
        None,
    ) * 4
    assert row["ended_at"] == later(5)


# ── The step claim ─────────────────────────────────────────────────────────


async def test_the_step_claim_has_one_winner_and_attempts_is_incremented_by_the_claim_alone(
    engine: AsyncEngine,
) -> None:
    run_id = await seed_run(engine, status="running", claimed_by="host:1")
    step_id = await seed_step(engine, run_id)
    async with engine.begin() as conn:
        first = await step_leases.claim(
            conn, step_id, run_id=run_id, owner="host:1", lease_until=later(60_000), now=T0
        )
    async with engine.begin() as conn:
        second = await step_leases.claim(
            conn, step_id, run_id=run_id, owner="host:1", lease_until=later(60_000), now=T0
        )
    assert (first, second) == (True, False)
    assert (await step_row(engine, step_id))["attempts"] == 1, "one claim, one attempt"


async def test_the_step_claim_refuses_a_step_held_behind_a_wait(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running", claimed_by="host:1")
    step_id = await seed_step(engine, run_id, due_at=later(300_000))
    async with engine.begin() as conn:
        assert not await step_leases.claim(
            conn, step_id, run_id=run_id, owner="host:1", lease_until=later(60_000), now=T0
        )
        assert await step_leases.claim(
            conn, step_id, run_id=run_id, owner="host:1", lease_until=later(360_000), now=later(301_000)
        )


async def test_the_step_claim_refuses_when_the_run_was_paused_mid_batch(engine: AsyncEngine) -> None:
    """The seed-named defect: a pause pressed mid-batch was ignored for up to 24 more steps.
    The claim carries the run's status, so the very next step is refused."""
    run_id = await seed_run(engine, status="running", claimed_by="host:1")
    step_id = await seed_step(engine, run_id)
    async with engine.begin() as conn:
        await runs_sql.transition(conn, run_id, "running", "paused", T0)
        claimed = await step_leases.claim(
            conn, step_id, run_id=run_id, owner="host:1", lease_until=later(60_000), now=T0
        )
    assert claimed is False
    assert (await step_row(engine, step_id))["status"] == "pending"


async def test_the_step_claim_refuses_a_runner_that_lost_the_run_lease(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running", claimed_by="host:2")
    step_id = await seed_step(engine, run_id)
    async with engine.begin() as conn:
        assert not await step_leases.claim(
            conn, step_id, run_id=run_id, owner="host:1", lease_until=later(60_000), now=T0
        )


# ── The reclaim: order, and what it must not touch ─────────────────────────


async def test_the_reclaim_hands_a_stale_step_back_without_resetting_attempts(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    step_id = await seed_step(engine, run_id, status="running", attempts=2, claim_expires_at=later(-1000))
    async with engine.begin() as conn:
        outcome = await step_leases.reclaim_stale(conn, T0, 3)
    assert (outcome.failed, outcome.reclaimed) == (0, 1)
    step = await step_row(engine, step_id)
    assert step["status"] == "pending"
    assert step["attempts"] == 2, (
        "Engagement Phase 14: a reclaim that reset this made MAX_ATTEMPTS unreachable"
    )


async def test_the_reclaim_gives_up_first_so_a_spent_step_leaves_running_as_failed(
    engine: AsyncEngine,
) -> None:
    run_id = await seed_run(engine, status="running")
    step_id = await seed_step(engine, run_id, status="running", attempts=3, claim_expires_at=later(-1000))
    async with engine.begin() as conn:
        outcome = await step_leases.reclaim_stale(conn, T0, 3)
    assert outcome.failed == 1
    assert outcome.reclaimed == 0, "reversing these two makes the row retry forever"
    step = await step_row(engine, step_id)
    assert (step["status"], step["attempts"]) == ("failed", 3)


async def test_the_reclaim_leaves_a_parked_step_alone_however_long_it_waits(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    step_id = await seed_step(engine, run_id, status="running", attempts=1, claim_expires_at=None)
    async with engine.begin() as conn:
        outcome = await step_leases.reclaim_stale(conn, later(ONE_YEAR_MS), 3)
    assert (outcome.failed, outcome.reclaimed) == (0, 0)
    step = await step_row(engine, step_id)
    assert (step["status"], step["attempts"]) == ("running", 1), "a NULL lease is a parked cue, not staleness"


async def test_the_reclaim_leaves_a_live_lease_alone(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    step_id = await seed_step(engine, run_id, status="running", attempts=1, claim_expires_at=later(1000))
    async with engine.begin() as conn:
        outcome = await step_leases.reclaim_stale(conn, T0, 3)
    assert (outcome.failed, outcome.reclaimed) == (0, 0)
    assert (await step_row(engine, step_id))["status"] == "running"


async def test_run_leases_of_dead_holders_are_dropped(engine: AsyncEngine) -> None:
    stale = await seed_run(engine, status="running", claimed_by="dead", claim_expires_at=later(-1))
    live = await seed_run(
        engine, status="running", claimed_by="alive", claim_expires_at=later(1000), scope="b"
    )
    async with engine.begin() as conn:
        assert await run_leases.reclaim_stale(conn, T0) == 1
    assert (await run_row(engine, stale))["claimed_by"] is None
    assert (await run_row(engine, live))["claimed_by"] == "alive"


# ── holdNext ───────────────────────────────────────────────────────────────


async def test_hold_next_moves_the_next_pending_step_of_the_phase_and_only_one(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    await seed_step(engine, run_id, seq=0, status="done")
    second = await seed_step(engine, run_id, seq=1)
    third = await seed_step(engine, run_id, seq=2)
    async with engine.begin() as conn:
        moved = await step_leases.hold_next(conn, run_id, "main", 0, later(300_000))
    assert moved is True
    assert (await step_row(engine, second))["due_at"] == later(300_000)
    assert (await step_row(engine, third))["due_at"] is None, "a wait holds the next step, not the rest"


async def test_hold_next_never_pulls_a_due_date_earlier(engine: AsyncEngine) -> None:
    """So a re-dispatched wait cannot double (or cut short) the hold; the loser is told 0."""
    run_id = await seed_run(engine, status="running")
    await seed_step(engine, run_id, seq=0, status="done")
    second = await seed_step(engine, run_id, seq=1, due_at=later(600_000))
    async with engine.begin() as conn:
        moved = await step_leases.hold_next(conn, run_id, "main", 0, later(300_000))
    assert moved is False
    assert (await step_row(engine, second))["due_at"] == later(600_000)


async def test_hold_next_twice_with_the_same_time_reports_zero_the_second_time(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    await seed_step(engine, run_id, seq=0, status="done")
    await seed_step(engine, run_id, seq=1)
    async with engine.begin() as conn:
        first = await step_leases.hold_next(conn, run_id, "main", 0, later(300_000))
        second = await step_leases.hold_next(conn, run_id, "main", 0, later(300_000))
    assert (first, second) == (True, False)


async def test_hold_next_skips_a_step_that_is_already_running(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    await seed_step(engine, run_id, seq=0, status="done")
    await seed_step(engine, run_id, seq=1, status="running")
    third = await seed_step(engine, run_id, seq=2)
    async with engine.begin() as conn:
        await step_leases.hold_next(conn, run_id, "main", 0, later(300_000))
    assert (await step_row(engine, third))["due_at"] == later(300_000)


# ── The two unique indexes that carry the weight ───────────────────────────


async def test_uq_evrun_occurrence_not_the_claim_stops_two_runs_of_one_occurrence(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as conn:
        common = await seed_occurrence(conn)
        first = await runs_sql.insert(conn, scope="", **common)
        second = await runs_sql.insert(conn, scope="", **common)
        total = (await conn.execute(sa.select(sa.func.count()).select_from(runs))).scalar()
    assert first is not None
    assert second is None, "INSERT IGNORE answers honestly rather than raising a duplicate-key error"
    assert total == 1


async def test_scope_empty_string_rather_than_null_is_what_makes_that_index_work(engine: AsyncEngine) -> None:
    """Many NULLs pass a unique index on MariaDB; '' collides as it must, and two different
    scopes are two different occurrences (fan-out)."""
    async with engine.begin() as conn:
        common = await seed_occurrence(conn)
        await runs_sql.insert(conn, scope="", **common)
        assert await runs_sql.insert(conn, scope="", **common) is None
        assert await runs_sql.insert(conn, scope="atlantic", **common) is not None
    assert runs.c.scope.nullable is False
    assert runs.c.scope.server_default is not None


async def test_uq_evstep_slot_makes_rematerialising_a_phase_a_noop(engine: AsyncEngine) -> None:
    """And a re-materialise cannot overwrite a key a dispatch already sent."""
    run_id = await seed_run(engine, status="running")
    spec = [steps_sql.StepSpec(action_id="test.noop", params={})]
    async with engine.begin() as conn:
        assert await steps_sql.materialise_phase(conn, run_id, "main", spec, T0) == 1
        (key,) = (
            await conn.execute(sa.select(steps.c.idempotency_key).where(steps.c.run_id == run_id))
        ).one()
        assert await steps_sql.materialise_phase(conn, run_id, "main", spec, T0) == 0
        keys = (
            (await conn.execute(sa.select(steps.c.idempotency_key).where(steps.c.run_id == run_id)))
            .scalars()
            .all()
        )
    assert keys == [key]


async def test_insert_ignore_reports_zero_for_a_duplicate_step_slot(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    row = {
        "run_id": run_id,
        "phase": "main",
        "seq": 0,
        "action_id": "a.b",
        "idempotency_key": "a" * 40,
        "created_at": T0,
        "updated_at": T0,
    }
    async with engine.begin() as conn:
        assert (await conn.execute(insert_ignore(conn, steps).values(**row))).rowcount == 1
        assert (
            await conn.execute(insert_ignore(conn, steps).values(**{**row, "idempotency_key": "b" * 40}))
        ).rowcount == 0


async def test_the_concurrency_slot_refuses_a_second_holder_of_one_key(engine: AsyncEngine) -> None:
    """Two runners that both found the key free: the slot's unique index lets one start."""
    first = await seed_run(engine, concurrency_key="invasion:Yew")
    second = await seed_run(engine, concurrency_key="invasion:Yew", scope="x")
    async with engine.begin() as conn:
        assert await run_leases.claim_start(conn, first, "host:1", later(60_000), T0)
    raised = False
    try:
        async with engine.begin() as conn:
            await run_leases.claim_start(conn, second, "host:2", later(60_000), T0)
    except sa.exc.IntegrityError:
        raised = True
    assert raised
    assert (await run_row(engine, second))["status"] == "scheduled"


# ── The grace window is per definition ─────────────────────────────────────


async def test_find_missed_compares_against_each_definitions_own_grace_window(engine: AsyncEngine) -> None:
    tight = await seed_run(engine, grace_seconds=600)
    generous = await seed_run(engine, grace_seconds=3600, scope="b")
    not_yet = await seed_run(engine, grace_seconds=0, scope="c", scheduled_for=later(60 * 60 * 1000))
    async with engine.connect() as conn:
        missed = await run_leases.find_missed(conn, later(30 * 60 * 1000))
    assert missed == [tight]
    assert generous not in missed, "inside its own window a run starts late rather than being missed"
    assert not_yet not in missed


# ── The controls a human presses ───────────────────────────────────────────


async def test_confirm_resolves_a_parked_cue_and_cannot_touch_a_step_being_dispatched(
    engine: AsyncEngine,
) -> None:
    run_id = await seed_run(engine, status="running")
    parked = await seed_step(
        engine, run_id, seq=0, status="running", claimed_by="host:1", claim_expires_at=None
    )
    busy = await seed_step(
        engine, run_id, seq=1, status="running", claimed_by="host:1", claim_expires_at=later(60_000)
    )
    async with engine.begin() as conn:
        assert await step_settles.confirm_parked(
            conn, parked, T0, actor=Actor(None, "gm"), note="gate opened"
        )
        assert not await step_settles.confirm_parked(conn, busy, T0, actor=Actor(None, "gm"), note="nope"), (
            "a live lease is owned"
        )
    step = await step_row(engine, parked)
    assert (step["status"], step["note"], step["settled_by_name"]) == ("done", "gate opened", "gm")
    assert (await step_row(engine, busy))["status"] == "running"


async def test_a_confirm_of_an_already_confirmed_cue_reports_zero_not_one(engine: AsyncEngine) -> None:
    """Engagement Phase 4a's shape: a matched-rows count that read a no-op as success would tell
    a second staff member their press worked."""
    run_id = await seed_run(engine, status="running")
    parked = await seed_step(engine, run_id, status="running", claim_expires_at=None)
    async with engine.begin() as conn:
        assert await step_settles.confirm_parked(conn, parked, T0, actor=Actor(None, "a"), note=None)
    async with engine.begin() as conn:
        assert not await step_settles.confirm_parked(conn, parked, T0, actor=Actor(None, "b"), note=None)
    assert (await step_row(engine, parked))["settled_by_name"] == "a"


async def test_skip_takes_a_pending_step_and_a_parked_cue_and_refuses_leased_and_failed(
    engine: AsyncEngine,
) -> None:
    run_id = await seed_run(engine, status="running")
    pending = await seed_step(engine, run_id, seq=0)
    parked = await seed_step(engine, run_id, seq=1, status="running", claim_expires_at=None)
    busy = await seed_step(engine, run_id, seq=2, status="running", claim_expires_at=later(60_000))
    failed = await seed_step(engine, run_id, seq=3, status="failed")
    async with engine.begin() as conn:
        assert await step_settles.skip_by_human(conn, pending, T0, actor=Actor(None, "m"), note=None)
        assert await step_settles.skip_by_human(conn, parked, T0, actor=Actor(None, "m"), note=None)
        assert not await step_settles.skip_by_human(conn, busy, T0, actor=Actor(None, "m"), note=None)
        assert not await step_settles.skip_by_human(conn, failed, T0, actor=Actor(None, "m"), note=None), (
            "resume carries past it"
        )
        assert not await step_settles.skip_by_human(conn, pending, T0, actor=Actor(None, "m"), note=None), (
            "a second skip is told 0"
        )


async def test_cancel_open_closes_pending_and_parked_and_leaves_a_leased_step_alone(
    engine: AsyncEngine,
) -> None:
    run_id = await seed_run(engine, status="running")
    done = await seed_step(engine, run_id, seq=0, status="done")
    busy = await seed_step(engine, run_id, seq=1, status="running", claim_expires_at=later(60_000))
    parked = await seed_step(engine, run_id, seq=2, status="running", claim_expires_at=None)
    pending = await seed_step(engine, run_id, seq=3)
    async with engine.begin() as conn:
        assert await step_settles.cancel_open(conn, run_id, T0) == 2
        assert await step_settles.cancel_open(conn, run_id, T0) == 0
    assert (await step_row(engine, done))["status"] == "done"
    assert (await step_row(engine, busy))["status"] == "running", "nothing can recall a command already sent"
    assert (await step_row(engine, parked))["status"] == "cancelled", (
        "a cancelled run stops waiting on somebody"
    )
    assert (await step_row(engine, pending))["status"] == "cancelled"


async def test_requeue_only_takes_a_failed_step_and_puts_attempts_back_to_zero(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="paused")
    failed = await seed_step(engine, run_id, seq=0, status="failed", attempts=3, due_at=later(30_000))
    pending = await seed_step(engine, run_id, seq=1)
    async with engine.begin() as conn:
        assert await step_settles.requeue(conn, failed, T0)
        assert not await step_settles.requeue(conn, failed, T0), "a second requeue is told 0"
        assert not await step_settles.requeue(conn, pending, T0)
    row = await step_row(engine, failed)
    assert (row["status"], row["attempts"], row["due_at"]) == ("pending", 0, None), (
        "due now, not at the old backoff"
    )


async def test_last_started_seq_names_the_furthest_step_not_the_earliest_unsettled(
    engine: AsyncEngine,
) -> None:
    """The replaced draft answered with the FIRST failure, a step the runner had long since
    stepped over after ``on_failure: skip``."""
    run_id = await seed_run(engine, status="paused")
    await seed_step(engine, run_id, seq=0, status="failed")
    await seed_step(engine, run_id, seq=1, status="done")
    await seed_step(engine, run_id, seq=2, status="failed")
    await seed_step(engine, run_id, seq=3)
    async with engine.connect() as conn:
        assert await steps_sql.last_started_seq(conn, run_id, "main") == 2


async def test_last_started_seq_is_none_for_a_phase_nothing_has_touched(engine: AsyncEngine) -> None:
    run_id = await seed_run(engine, status="running")
    await seed_step(engine, run_id, seq=0)
    async with engine.connect() as conn:
        assert await steps_sql.last_started_seq(conn, run_id, "main") is None, (
            "None is 'nothing to retry', not seq 0"
        )


async def test_finish_and_reschedule_refuse_a_runner_that_no_longer_holds_the_step(
    engine: AsyncEngine,
) -> None:
    """After a reclaim handed the step to another runner, the first one's late answer is told 0."""
    run_id = await seed_run(engine, status="running")
    step_id = await seed_step(
        engine, run_id, status="running", claimed_by="host:2", claim_expires_at=later(60_000)
    )
    async with engine.begin() as conn:
        assert not await step_leases.finish(conn, step_id, "host:1", "done", T0)
        assert not await step_leases.reschedule(conn, step_id, "host:1", later(30_000), "x", T0)
        assert not await step_leases.park(conn, step_id, "host:1", T0)
        assert await step_leases.finish(conn, step_id, "host:2", "done", T0)
        assert not await step_leases.finish(conn, step_id, "host:2", "done", T0), "a second finish is told 0"


async def test_release_keeps_a_wake_written_by_a_control_during_the_tick(engine: AsyncEngine) -> None:
    """A GM's confirm landing while a tick holds the run must not be overwritten by the tick's
    "parked, nothing to do" when it gives the lease back."""
    run_id = await seed_run(
        engine, status="running", claimed_by="host:1", claim_expires_at=later(60_000), wake_at=T0
    )
    seen = int((await run_row(engine, run_id))["nudges"])
    async with engine.begin() as conn:
        await run_leases.wake_now(conn, run_id, later(10))
        await run_leases.release_claim(conn, run_id, "host:1", wake_at=None, nudges_seen=seen)
    row = await run_row(engine, run_id)
    assert row["wake_at"] == later(10)
    assert row["claimed_by"] is None
