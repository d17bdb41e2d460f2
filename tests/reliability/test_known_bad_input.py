"""Bad input the property tests found crashing or slipping through, pinned as plain examples.

Each test states the promise, not the fix: "refused at validation with its place named, or
accepted and then actually runnable". Each was found by the property tests in
``test_bad_input.py`` on their first run, pinned here as ``xfail(strict=True)`` while the defect
stood, and is now a plain regression test; the strategies there were widened to cover it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from runner import catalog
from runner import definitions as defs
from runner.clock import ManualClock
from runner.controls import Controls
from runner.db import create_engine
from runner.dispatch import perform
from runner.errors import DefinitionError
from runner.history import Actor
from runner.registry import Envelope
from runner.schema import runs
from tests.support.definitions import event, phase, wait
from tests.support.world import T0
from wiring.control_text import control_text as said

REGISTRY = validation_registry()


def definition(**fields: Any) -> dict[str, Any]:
    return {**event("bad", phase("main", wait(5))), **fields}


@pytest.mark.parametrize("duration", ["nan", float("nan"), " NaN "])
async def test_a_wait_of_nan_seconds_is_refused_when_validated_not_when_run(duration: Any) -> None:
    # Widen ``DURATIONS`` in test_bad_input.py with "nan" once this passes.
    raw = definition(
        phases=[
            {
                "key": "main",
                "label": "Main",
                "steps": [{"action": "core.wait", "params": {"duration": duration}}],
            }
        ]
    )
    try:
        validated = defs.validate(raw, REGISTRY, file="nan.yaml")
    except DefinitionError as error:
        assert any(p.phase == "main" and p.step == 0 and p.field == "params.duration" for p in error.problems)
        return
    envelope = Envelope(None, "k" * 40, dict(validated.phases[0].steps[0].params), 1, "", 1, True)
    outcome = await perform(REGISTRY, envelope, "core.wait")
    assert outcome.outcome == "done", f"validated, then refused at run time: {outcome.error}"


@pytest.mark.parametrize("template", ["{scope!x}", "{scope:d}", "{scope:%}"])
async def test_a_concurrency_key_that_cannot_be_filled_in_is_refused_not_raised_at_start(
    template: str, sqlite_engine: AsyncEngine
) -> None:
    # Widen ``TEMPLATES`` in test_bad_input.py with conversions and format specs once this passes.
    await _validated_then_started(sqlite_engine, definition(concurrency_key=template, scopes=["eu"]))


@pytest.mark.mariadb
async def test_a_concurrency_key_longer_than_its_column_is_refused_not_truncated(mariadb_url: str) -> None:
    engine = create_engine(mariadb_url)
    try:
        await _validated_then_started(
            engine, definition(concurrency_key="{scope}-{scope}", scopes=["a" * 120, "a" * 120 + "b"])
        )
    finally:
        await engine.dispose()


async def _validated_then_started(engine: AsyncEngine, raw: dict[str, Any]) -> None:
    """The promise: refused with its place, or started with every run holding its own full key."""
    try:
        validated = defs.validate(raw, REGISTRY, file="key.yaml")
    except DefinitionError as error:
        assert any(p.field == "concurrency_key" for p in error.problems), [str(p) for p in error.problems]
        return
    clock = ManualClock(T0)
    await catalog.publish(engine, validated, clock.now())
    result = await Controls(engine, clock=clock).start(validated.key, actor=Actor(None, "test"))
    assert result.ok, result.message
    async with engine.connect() as conn:
        stored = (await conn.execute(sa.select(runs.c.scope, runs.c.concurrency_key))).all()
    for scope, key in stored:
        assert key == validated.concurrency_key_for(scope), f"scope {scope[:10]}...: key stored as {key!r}"


def test_deeply_nested_yaml_is_refused_with_a_problem_not_a_recursion_error() -> None:
    with pytest.raises(DefinitionError) as refused:
        defs.parse_yaml("phases: " + "[" * 5000, file="deep.yaml")
    assert refused.value.problems[0].file == "deep.yaml"


@pytest.mark.parametrize("control", ["pause", "resume", "retry", "cancel", "confirm", "skip"])
async def test_a_control_given_an_id_past_64_bits_answers_no_such_run(
    control: str, sqlite_engine: AsyncEngine
) -> None:
    controls = Controls(sqlite_engine, clock=ManualClock(T0 + dt.timedelta(minutes=1)))
    huge = 2**64
    if control == "cancel":
        result = await controls.cancel(huge, reason="r", actor=None)
    else:
        result = await getattr(controls, control)(huge, actor=None)
    assert not result.ok and "no such" in said(result)


def test_scopes_that_differ_only_in_letter_case_are_refused_when_validated() -> None:
    """MariaDB's default collation compares scopes case-blind: 'eu' and 'EU' were one occurrence
    there (the second silently dropped by INSERT IGNORE) and two on SQLite. Refused up front."""
    with pytest.raises(DefinitionError) as refused:
        defs.validate(definition(scopes=["eu", "EU"]), REGISTRY, file="scopes.yaml")
    [problem] = refused.value.problems
    assert (problem.file, problem.field) == ("scopes.yaml", "scopes")
    assert "letter case" in problem.message
