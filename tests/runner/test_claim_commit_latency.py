"""A step claim is acted on only while its lease still covers the action, however long the
claim's COMMIT took (``runner/engine/claims.py``).

On Galera every COMMIT waits while the cluster drops a node that died, for seconds; on any server
a loaded machine can stall one. The lease a claim writes was computed before its COMMIT, so a
COMMIT that returns late hands the runner a lease that may already have run out. Here the clock
jumps past the lease while the claim's COMMIT is in flight (a ``commit`` listener, on both
backends), which is exactly what a slow COMMIT looks like to the runner.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from runner.registry import Envelope
from runner.schema import steps
from runner.sql import step_leases
from tests.support.actions import build_action
from tests.support.world import World, phase, step

BUDGET_MS = 1000


def _late_commits(world: World, monkeypatch: pytest.MonkeyPatch, late: dt.timedelta) -> list[int]:
    """Make the COMMIT of every step claim return ``late`` after it was sent; the claims made."""
    claims: list[int] = []
    original = step_leases.claim

    async def claim(conn: Any, step_id: int, **kw: Any) -> bool:
        won = await original(conn, step_id, **kw)
        if won:
            claims.append(step_id)
        return won

    monkeypatch.setattr(step_leases, "claim", claim)
    pending = {"n": 0}

    @event.listens_for(world.engine.sync_engine, "commit")
    def slow_commit(_conn: Any) -> None:
        if len(claims) > pending["n"]:
            pending["n"] = len(claims)
            world.clock.advance(late.total_seconds())

    return claims


async def test_defect_galera_a_claim_whose_commit_returned_after_its_lease_ran_out_is_stretched_before_the_action_goes(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[dt.datetime, dt.datetime | None, str | None]] = []

    async def probe(envelope: Envelope, params: Any) -> dict[str, Any]:
        async with world.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(steps.c.claim_expires_at, steps.c.claimed_by).where(
                        steps.c.id == envelope.step_id
                    )
                )
            ).one()
        seen.append((world.clock.now(), row.claim_expires_at, row.claimed_by))
        return {"ok": True}

    world.register(build_action("test.probe", probe, budget_ms=BUDGET_MS))
    run_id = await world.seed_run([phase("one", step("test.probe"), step("test.probe"))])
    margin = dt.timedelta(seconds=world.runner.settings.step_lease_margin_seconds)
    claims = _late_commits(world, monkeypatch, late=margin + dt.timedelta(seconds=5))

    await world.tick()

    assert len(claims) == 2, "both steps were claimed (the second in the first one's settle)"
    assert len(seen) == 2, f"each step dispatched once: {seen}"
    for at, lease_until, owner in seen:
        # Without the check, the action went at a moment past the lease its claim wrote.
        assert owner == world.runner.owner
        assert lease_until is not None and lease_until - at >= dt.timedelta(milliseconds=BUDGET_MS), (
            f"dispatched at {at} under a lease until {lease_until}"
        )
    assert (await world.run(run_id))["status"] == "completed"


async def test_defect_galera_a_claim_whose_lease_was_taken_while_its_commit_waited_is_not_acted_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the late claim's lease was reclaimed by someone else meanwhile, the stretch is refused
    and the action does not go here."""
    dispatched: list[int] = []

    async def probe(envelope: Envelope, params: Any) -> dict[str, Any]:
        dispatched.append(envelope.step_id)
        return {"ok": True}

    world.register(build_action("test.probe", probe, budget_ms=BUDGET_MS))
    run_id = await world.seed_run([phase("one", step("test.probe"))])
    margin = dt.timedelta(seconds=world.runner.settings.step_lease_margin_seconds)
    original = step_leases.stretch

    async def stretch(conn: Any, step_id: int, owner: str, **kw: Any) -> bool:
        # Another runner reclaimed and claimed the step after our lease ran out.
        await conn.execute(sa.update(steps).where(steps.c.id == step_id).values(claimed_by="someone-else"))
        return await original(conn, step_id, owner, **kw)

    monkeypatch.setattr(step_leases, "stretch", stretch)
    _late_commits(world, monkeypatch, late=margin + dt.timedelta(seconds=5))

    await world.tick()

    assert dispatched == [], "the action went under a lease someone else held"
    (row,) = await world.steps_of(run_id)
    assert row["claimed_by"] == "someone-else" and row["status"] == "running"
