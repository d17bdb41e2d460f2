"""Bad input: generated definitions, params, YAML and control arguments.

The promise (issue 4): nothing crashes, every refusal names its place, and nothing half-written is
left in the database.

* **Definitions.** Valid definitions are built from the real actions' params, then mutated in one
  known place (a key dropped, a wrong type, a huge or unicode string, a negative number, an
  unknown action, a bad cron or time zone, an unknown field). ``validate`` must return or raise
  ``DefinitionError``; every ``Problem`` has a message and the file, a step is never named without
  its phase, and at least one problem names the place that was broken (the phase by its key, or by
  ``#index`` when the key itself is what is broken; the step by its index).
* **Valid means runnable.** A definition that validates is published, read back identical, and
  started; every step's params are accepted by its action (a verify dispatch answers ok), and its
  concurrency key can be filled in for every scope and fits the column.
* **YAML.** Arbitrary and almost-YAML text: ``parse_yaml`` returns or raises ``DefinitionError``.
* **Controls.** Random ids (negative, zero, huge), reasons, notes, scopes and keys, ``None`` actors,
  against a database holding runs in every state: a control answers; when it refuses, every table
  is exactly as it was before.

Their first run found six defects (NaN waits, concurrency-key format specs and lengths, scopes
differing only by letter case, deeply nested YAML, ids past 64 bits); each is fixed and pinned by
a plain example in ``test_known_bad_input.py``, and the strategies (``tests/support/definition_strategies.py``)
cover those inputs.

Hypothesis keeps no example database here (``database=None``): the suite must not write outside
its own directory. A failure prints its example and the ``@reproduce_failure`` blob.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner import definitions as defs
from runner.clock import ManualClock
from runner.controls import ControlResult, Controls
from runner.db import create_engine
from runner.errors import DefinitionError
from runner.history import Actor
from runner.migrate import upgrade
from runner.schema import definitions, metadata, runs, steps, versions
from tests.reliability.harness import run_in_thread
from tests.support.definition_strategies import (
    FILE,
    JSON,
    NASTY_TEXT,
    REGISTRY,
    YAML_ALPHABET,
    Place,
    check_problems,
    check_runnable,
    mutated_definitions,
    names_the_place,
    valid_definitions,
)
from tests.support.tiers import examples
from tests.support.world import T0, World, phase, step

FAST = settings(max_examples=examples(300), deadline=None, database=None, print_blob=True)
DB = settings(
    max_examples=examples(40),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)

# ── Definitions and YAML (no database) ─────────────────────────────────────


@given(mutated=mutated_definitions())
@FAST
def test_a_broken_definition_is_refused_with_the_place_named(mutated: tuple[dict[str, Any], Place]) -> None:
    raw, place = mutated
    try:
        defs.validate(raw, REGISTRY, file=FILE)
    except DefinitionError as error:
        event(f"refused ({'top' if place.field else 'step' if place.step is not None else 'phase'})")
        check_problems(error, FILE)
        assert names_the_place(error, raw, place), (
            f"broken at {place}, but no problem names it: {[str(p) for p in error.problems]}"
        )


@given(raw=JSON)
@settings(max_examples=examples(200), deadline=None, database=None)
def test_any_value_at_all_is_validated_or_refused(raw: Any) -> None:
    try:
        defs.validate(raw, REGISTRY, file=None)
    except DefinitionError as error:
        check_problems(error, None)


@given(raw=valid_definitions())
@settings(max_examples=examples(150), deadline=None, database=None)
def test_a_definition_that_validates_is_one_its_actions_accept(raw: dict[str, Any]) -> None:
    definition = defs.validate(raw, REGISTRY, file=FILE)
    check_runnable(definition)


@st.composite
def almost_yaml(draw: st.DrawFn) -> str:
    text = yaml.safe_dump(draw(valid_definitions()), allow_unicode=draw(st.booleans()), sort_keys=False)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        cut = draw(st.integers(min_value=0, max_value=8))
        insert = draw(st.text(alphabet=YAML_ALPHABET, max_size=6))
        text = text[:at] + insert + text[at + cut :]
    return text


# Deep enough to exhaust PyYAML's recursion (``test_known_bad_input`` pins that case exactly).
NESTED = st.integers(min_value=1, max_value=5000).map(
    lambda n: "a:\n" + "".join(" " * i + "- [" for i in range(n))
)


@given(
    text=st.one_of(
        almost_yaml(), st.text(max_size=300), st.text(alphabet=YAML_ALPHABET, max_size=200), NESTED
    )
)
@settings(max_examples=examples(250), deadline=None, database=None)
def test_any_yaml_text_is_parsed_or_refused_with_its_line(text: str) -> None:
    try:
        raw = defs.parse_yaml(text, file=FILE)
    except DefinitionError as error:
        check_problems(error, FILE)
        return
    try:
        defs.validate(raw, REGISTRY, file=FILE)
    except DefinitionError as error:
        check_problems(error, FILE)


# ── Publishing: validate, publish, start ───────────────────────────────────


async def snapshot(engine: AsyncEngine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order."""
    async with engine.connect() as conn:
        return {
            table.name: sorted(
                (tuple(repr(v) for v in row) for row in (await conn.execute(sa.select(table))).all()),
            )
            for table in metadata.sorted_tables
        }


async def author(engine: AsyncEngine, raw: dict[str, Any], clock: ManualClock) -> None:
    """What the CLI and the bot do with a file: validate, publish, start."""
    before = await snapshot(engine)
    try:
        definition = defs.validate(raw, REGISTRY, file=FILE)
    except DefinitionError as error:
        event("definition refused")
        check_problems(error, FILE)
        assert await snapshot(engine) == before, "a refused definition wrote to the database"
        return
    published = await catalog.publish(
        engine, definition, clock.now(), source=FILE, actor=Actor(None, "author")
    )
    async with engine.connect() as conn:
        stored = (
            await conn.execute(sa.select(versions.c.spec).where(versions.c.id == published.version_id))
        ).scalar_one()
    assert defs.from_spec(stored) == definition, "the stored version is not the definition published"
    after_publish = await snapshot(engine)
    result = await Controls(engine, clock=clock).start(definition.key, actor=Actor(None, "author"))
    assert isinstance(result, ControlResult) and result.message
    event(f"start {'acted' if result.ok else 'refused'}")
    if not result.ok:
        assert await snapshot(engine) == after_publish, f"a refused start wrote: {result.message}"
        return
    first = definition.phases[0]
    async with engine.connect() as conn:
        for run_id in result.run_ids:
            run = (await conn.execute(sa.select(runs).where(runs.c.id == run_id))).mappings().one()
            assert run["concurrency_key"] == definition.concurrency_key_for(run["scope"])
    async with engine.connect() as conn:
        counts = (
            await conn.execute(
                sa.select(steps.c.run_id, sa.func.count())
                .where(steps.c.run_id.in_(result.run_ids))
                .group_by(steps.c.run_id)
            )
        ).all()
    assert sorted(n for _, n in counts) == [len(first.steps)] * len(result.run_ids), "a run without its steps"


DEFINITION_INPUTS = st.one_of(valid_definitions(), mutated_definitions().map(lambda m: m[0]))


@pytest.fixture(scope="session")
def publish_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One migrated SQLite file for all the publishing examples (they only ever add to it)."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('publish') / 'publish.sqlite3'}"

    async def migrate() -> None:
        engine = create_engine(url)
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    run_in_thread(migrate())
    return url


def _author_on(url: str, raw: dict[str, Any]) -> None:
    async def go() -> None:
        engine = create_engine(url)
        try:
            await author(engine, raw, ManualClock(T0))
        finally:
            await engine.dispose()

    asyncio.run(go())


@given(raw=DEFINITION_INPUTS)
@DB
def test_publishing_is_all_or_nothing_on_sqlite(raw: dict[str, Any], publish_sqlite_url: str) -> None:
    _author_on(publish_sqlite_url, raw)


@pytest.mark.mariadb
@given(raw=DEFINITION_INPUTS)
@DB
def test_publishing_is_all_or_nothing_on_mariadb(raw: dict[str, Any], mariadb_session_url: str) -> None:
    _author_on(mariadb_session_url, raw)


# ── Controls ────────────────────────────────────────────────────────────────


@dataclass
class Seeded:
    runs: list[int]
    steps: list[int]
    keys: list[str]


async def seed_control_world(engine: AsyncEngine) -> Seeded:
    """Runs in every state a control can meet: a parked cue, a run paused at a failed step, a
    completed run, one scheduled tomorrow, a step being dispatched, a cancelled run, a step held
    behind a wait."""
    world = World(engine)
    s = world.scripted
    world.register(s.action("test.ok"), s.action("test.cue"), s.action("test.fail"), s.action("test.wait"))
    s["test.cue"].answer = {"ok": True, "await": "human"}
    s["test.fail"].answer = {"ok": False, "retry": False, "error": "boom"}
    s["test.wait"].answer = {"ok": True, "holdFor": 3600}
    parked = await world.seed_run([phase("main", step("test.cue"), step("test.ok"))], scope="a")
    paused = await world.seed_run([phase("main", step("test.fail", on_failure="pause"), step("test.ok"))])
    done = await world.seed_run([phase("main", step("test.ok")), phase("two", step("test.ok"))])
    tomorrow = await world.seed_run([phase("main", step("test.ok"))], scheduled_for=T0 + dt.timedelta(days=1))
    # Not due until tomorrow, so the tick leaves it alone; then made a run whose first step is
    # being dispatched by another runner right now.
    leased = await world.seed_run(
        [phase("main", step("test.ok"), step("test.ok"))], scheduled_for=T0 + dt.timedelta(days=1)
    )
    cancelled = await world.seed_run([phase("main", step("test.cue"))])
    held = await world.seed_run([phase("main", step("test.wait"), step("test.ok"))])
    await world.tick()
    await world.set_run(leased, status="running", current_phase="main", scheduled_for=T0, started_at=T0)
    await world.set_step(
        (await world.steps_of(leased))[0]["id"],
        status="running",
        attempts=1,
        claimed_by="other",
        claim_expires_at=T0 + dt.timedelta(minutes=5),
    )
    assert (await world.controls.cancel(cancelled, reason="seeding", actor=Actor(None, "seed"))).ok
    run_ids = [parked, paused, done, tomorrow, leased, cancelled, held]
    step_ids = [int(r["id"]) for run_id in run_ids for r in await world.steps_of(run_id)]
    async with engine.connect() as conn:
        keys = list((await conn.execute(sa.select(definitions.c.key))).scalars().all())
    return Seeded(run_ids, step_ids, keys)


ACTORS = st.one_of(
    st.none(),
    st.builds(
        Actor,
        st.one_of(st.none(), st.just("123456789012345678")),
        st.one_of(st.text(max_size=100), st.sampled_from(["gm", "alice (123456789012345678)"])),
    ),
)
NOTES = st.one_of(st.none(), NASTY_TEXT)


def ids(bits: int) -> st.SearchStrategy[Any]:
    """An index into the seeded ids (``("seeded", n)``), or any integer."""
    seeded = st.tuples(st.just("seeded"), st.integers(min_value=0, max_value=60))
    return st.one_of(
        seeded,
        seeded,
        st.integers(min_value=-(2 ** (bits - 1)), max_value=2 ** (bits - 1) - 1),
        st.sampled_from([0, -1, 1, 2]),
    )


def control_calls(bits: int) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    run = ids(bits)
    scopes = st.one_of(st.none(), st.none(), st.sampled_from(["", "a", "b"]), NASTY_TEXT)
    key = st.tuples(st.just("key"), st.integers(0, 20))
    return st.one_of(
        st.tuples(
            st.just("start"),
            st.fixed_dictionaries(
                {
                    "definition_key": st.one_of(key, key, NASTY_TEXT),
                    "scope": scopes,
                    "actor": ACTORS,
                    "rehearsal": st.booleans(),
                }
            ),
        ),
        st.tuples(
            st.sampled_from(["pause", "resume", "retry"]),
            st.fixed_dictionaries({"run_id": run, "actor": ACTORS}),
        ),
        st.tuples(
            st.just("cancel"), st.fixed_dictionaries({"run_id": run, "reason": NASTY_TEXT, "actor": ACTORS})
        ),
        st.tuples(
            st.just("confirm"), st.fixed_dictionaries({"step_id": ids(bits), "actor": ACTORS, "note": NOTES})
        ),
        st.tuples(
            st.just("skip"),
            st.fixed_dictionaries(
                {"step_id": ids(bits), "actor": ACTORS, "note": NOTES, "run_id": st.one_of(st.none(), run)}
            ),
        ),
    )


def _resolve(value: Any, pool: list[Any]) -> Any:
    if isinstance(value, tuple) and value and value[0] in ("seeded", "key"):
        return pool[value[1] % len(pool)]
    return value


async def press(engine: AsyncEngine, seeded: Seeded, calls: list[tuple[str, dict[str, Any]]]) -> None:
    controls = Controls(engine, clock=ManualClock(T0 + dt.timedelta(minutes=1)))
    for name, raw_args in calls:
        args = dict(raw_args)
        for field in ("run_id",):
            if field in args:
                args[field] = _resolve(args[field], seeded.runs)
        if "step_id" in args:
            args["step_id"] = _resolve(args["step_id"], seeded.steps)
        if "definition_key" in args:
            args["definition_key"] = _resolve(args["definition_key"], seeded.keys)
        positional = (
            args.pop("definition_key", None)
            if name == "start"
            else args.pop("step_id" if name in ("confirm", "skip") else "run_id")
        )
        before = await snapshot(engine)
        result = await getattr(controls, name)(positional, **args)
        event(f"{name}: {'acted' if result.ok else 'refused'}")
        assert isinstance(result, ControlResult), f"{name} answered {result!r}"
        assert isinstance(result.message, str) and result.message.strip(), f"{name} refused without a word"
        after = await snapshot(engine)
        if result.ok:
            assert after != before, f"{name}({positional!r}) said it acted but changed nothing"
        else:
            changed = [table for table in before if before[table] != after[table]]
            assert not changed, (
                f"{name}({positional!r}, {args}) refused ({result.message}) yet changed {changed}"
            )


@pytest.fixture(scope="session")
def controls_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Seeded]:
    """A seeded SQLite file built once; every example works on a fresh copy of it."""
    path = tmp_path_factory.mktemp("controls") / "template.sqlite3"

    async def build() -> Seeded:
        engine = create_engine(f"sqlite+aiosqlite:///{path}")
        try:
            await upgrade(engine)
            return await seed_control_world(engine)
        finally:
            await engine.dispose()

    return path, run_in_thread(build())


# Ids well past SQLite's 64 bits: a control answers "no such run" without asking the database.
@given(calls=st.lists(control_calls(bits=90), min_size=1, max_size=6))
@settings(max_examples=examples(60), deadline=None, database=None, print_blob=True)
def test_controls_with_any_arguments_answer_and_a_refusal_changes_nothing_on_sqlite(
    calls: list[tuple[str, dict[str, Any]]], controls_template: tuple[Path, Seeded]
) -> None:
    template, seeded = controls_template
    example = template.with_name("example.sqlite3")
    shutil.copyfile(template, example)

    async def go() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{example}")
        try:
            await press(engine, seeded, calls)
        finally:
            await engine.dispose()

    asyncio.run(go())


@pytest.mark.mariadb
@given(calls=st.lists(control_calls(bits=90), min_size=1, max_size=6))
@settings(
    max_examples=examples(25),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_controls_with_any_arguments_answer_and_a_refusal_changes_nothing_on_mariadb(
    calls: list[tuple[str, dict[str, Any]]], mariadb_session_url: str
) -> None:
    async def go() -> None:
        engine = create_engine(mariadb_session_url)
        try:
            async with engine.begin() as conn:
                for table in reversed(metadata.sorted_tables):
                    await conn.execute(table.delete())
            seeded = await seed_control_world(engine)
            await press(engine, seeded, calls)
        finally:
            await engine.dispose()

    asyncio.run(go())
