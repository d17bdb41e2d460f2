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
a plain example in ``test_known_bad_input.py``, and the strategies here cover those inputs.

Hypothesis keeps no example database here (``database=None``): the suite must not write outside
its own directory. A failure prints its example and the ``@reproduce_failure`` blob.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import shutil
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from runner import catalog
from runner import definitions as defs
from runner.clock import ManualClock
from runner.controls import ControlResult, Controls
from runner.db import create_engine
from runner.dispatch import perform
from runner.errors import DefinitionError, Problem
from runner.migrate import upgrade
from runner.registry import Envelope
from runner.schema import definitions, metadata, runs, steps, versions
from tests.reliability.harness import run_in_thread
from tests.support.tiers import examples
from tests.support.world import T0, World, phase, step

REGISTRY = validation_registry()
FILE = "events/bad.yaml"
CONCURRENCY_KEY_MAX = runs.c.concurrency_key.type.length  # type: ignore[attr-defined]

FAST = settings(max_examples=examples(300), deadline=None, database=None, print_blob=True)
DB = settings(
    max_examples=examples(40),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)

# ── Strategies ──────────────────────────────────────────────────────────────

KEYS = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,30}", fullmatch=True)
TEXT = st.text(min_size=1, max_size=60)


def message_text(min_size: int = 0, max_size: int = 300) -> st.SearchStrategy[str]:
    """Text players read, with its braces escaped (``{{``/``}}``) so it is valid however odd it is,
    and now and then a ``{scope}`` placeholder: the placeholder rule is exercised, never tripped."""
    escaped = st.text(min_size=min_size, max_size=max_size // 2).map(
        lambda t: t.replace("{", "{{").replace("}", "}}")
    )
    return st.one_of(escaped, escaped, escaped.map(lambda t: t + " {scope}"))


# A label has no room to escape into (200 characters), so braces are left out of it.
LABELS = st.text(max_size=200).filter(lambda t: "{" not in t and "}" not in t)
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(min_size=190, max_size=260),
    st.sampled_from(["", " ", "\n", "{scope}", "{", "}", "\x00", "\u202e", "🎉" * 70, "x" * 5000, "NULL"]),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, -0.0, 10**9, 2**63]),
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | NASTY_TEXT,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
# Valid durations only (NaN is refused at validation; ``test_known_bad_input`` pins that).
DURATIONS = st.one_of(
    st.integers(min_value=1, max_value=7 * 24 * 3600),
    st.floats(min_value=0.001, max_value=7 * 24 * 3600),
    st.sampled_from(["90s", "5m", "1h30m", "2d", "0.5", "1e3", " 10 ", "1h"]),
)
CHANNELS = st.sampled_from(["#general", "events", "announcements-2", "123456789012345678"])
# Within runner.limits for up to three scopes (at most 500 runs a day, 5 minutes apart).
CRONS = st.sampled_from(["*/10 * * * *", "0 20 * * 5", "30 18 1 * *", "0 0 * * MON-FRI"])
ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"])
# Still to come whenever the suite runs: validation refuses a ``once`` that is already over.
ONCE = st.datetimes(
    min_value=dt.datetime(2090, 1, 1), max_value=dt.datetime(2199, 1, 1), timezones=st.timezones()
).map(lambda moment: moment.isoformat())
# Templates whose filled-in key fits the column for scopes up to SCOPE_MAX; conversions, format
# specs and double ``{scope}`` are pinned in ``test_known_bad_input`` instead.
TEMPLATES = st.sampled_from(
    [None, "{scope}", "event-{scope}", "lock", "{{literal}}-{scope}", "{scope}{scope}"]
)
SCOPE_MAX = 150


@st.composite
def steps_(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["wait", "announce", "cue"]))
    if kind == "wait":
        body: dict[str, Any] = {"action": "core.wait", "params": {"duration": draw(DURATIONS)}}
    elif kind == "announce":
        params: dict[str, Any] = {"channel": draw(CHANNELS)}
        if draw(st.booleans()):
            params["content"] = draw(message_text(min_size=1))
        else:
            params["embed"] = {"title": draw(message_text(1, 120)), "description": draw(message_text(0, 200))}
        if draw(st.booleans()):
            params["ping_role"] = draw(st.sampled_from(["raiders", "everyone-events"]))
        body = {"action": "discord.announce", "params": params}
    else:
        body = {"action": "gm.cue", "params": {"instructions": draw(message_text(min_size=1))}}
    if draw(st.booleans()):
        body["label"] = draw(LABELS)
    if draw(st.booleans()):
        body["on_failure"] = draw(st.sampled_from(["skip", "pause", "abort_run"]))
    return body


@st.composite
def valid_definitions(draw: st.DrawFn) -> dict[str, Any]:
    phase_keys = draw(st.lists(KEYS, min_size=1, max_size=3, unique=True))
    raw: dict[str, Any] = {
        "key": draw(KEYS),
        "title": draw(st.text(min_size=1, max_size=200)),
        "phases": [
            {"key": key, "label": draw(TEXT), "steps": draw(st.lists(steps_(), min_size=1, max_size=3))}
            for key in phase_keys
        ],
    }
    if draw(st.booleans()):
        raw["description"] = draw(st.text(max_size=300))
    schedule = draw(st.sampled_from(["none", "manual", "once", "cron"]))
    if schedule == "manual":
        raw["schedule"] = "manual"
    elif schedule == "once":
        raw["schedule"] = {"once": draw(ONCE)}
    elif schedule == "cron":
        raw["schedule"] = {"cron": draw(CRONS), "timezone": draw(ZONES)}
    if draw(st.booleans()):
        raw["grace_seconds"] = draw(st.integers(min_value=0, max_value=7 * 24 * 3600))
    if draw(st.booleans()):
        raw["scopes"] = draw(st.lists(st.text(min_size=1, max_size=SCOPE_MAX), max_size=3, unique=True))
    template = draw(TEMPLATES)
    if template is not None:
        raw["concurrency_key"] = template
    return raw


@dataclass(frozen=True)
class Place:
    """Where a mutation was made: a top-level field, or inside phase ``phase`` (step ``step``)."""

    field: str | None = None
    phase: int | None = None
    step: int | None = None
    in_params: bool = False


SPECIAL: dict[str, list[Any]] = {
    "key": ["Bad Key", "", "a" * 65, "ÜBER", 7],
    "title": ["", "t" * 201, None, ["list"]],
    "schedule": [
        {"cron": "61 * * * *", "timezone": "UTC"},
        {"cron": "* * * * *", "timezone": "Mars/Olympus"},
        {"cron": "* * * * *", "timezone": "Europe/"},
        {"cron": "", "timezone": "UTC"},
        {"once": "2026-12-05T19:00:00"},
        {"once": "yesterday"},
        {"kind": "weekly"},
        "sometimes",
    ],
    "grace_seconds": [-1, 10**9, "15m", 1.5, None, True],
    "scopes": [["dup", "dup"], [""], ["s" * 191], "not-a-list", [1, 2]],
    "concurrency_key": [
        "",
        "{other}",
        "{0}",
        "{scope.upper}",
        "{",
        "k" * 151,
        "{scope!x}",
        "{scope:d}",
        "{scope:%}",
    ],
    "phases": [[], {}, "main", [None]],
    "phase.key": ["", "Bad Key", "a" * 65, 3, None],
    "phase.label": ["", "l" * 201, None],
    "phase.steps": [[], None, "steps", [None]],
    "step.action": ["discord.anounce", "", "core", None, 5, "x" * 200],
    "step.on_failure": ["retry", "", None, 0],
    "step.label": ["l" * 201, 3],
    "step.params": [None, "params", [1], {"nope": 1}],
}


@st.composite
def mutated_definitions(draw: st.DrawFn) -> tuple[dict[str, Any], Place]:
    raw = copy.deepcopy(draw(valid_definitions()))
    level = draw(st.sampled_from(["top", "phase", "step", "params"]))
    value = draw(st.one_of(JSON, st.just("<delete>")))
    if level == "top":
        field = draw(st.sampled_from([*SPECIAL.keys() - {k for k in SPECIAL if "." in k}, "colour"]))
        if field in SPECIAL and draw(st.booleans()):
            value = draw(st.sampled_from(SPECIAL[field]))
        _set(raw, field, value)
        return raw, Place(field=field)
    p = draw(st.integers(min_value=0, max_value=len(raw["phases"]) - 1))
    target_phase = raw["phases"][p]
    if level == "phase":
        field = draw(st.sampled_from(["key", "label", "steps", "extra", "<whole>"]))
        if field == "<whole>":
            raw["phases"][p] = value if value != "<delete>" else None
            return raw, Place(phase=p)
        if f"phase.{field}" in SPECIAL and draw(st.booleans()):
            value = draw(st.sampled_from(SPECIAL[f"phase.{field}"]))
        _set(target_phase, field, value)
        return raw, Place(phase=p)
    s = draw(st.integers(min_value=0, max_value=len(target_phase["steps"]) - 1))
    target_step = target_phase["steps"][s]
    if level == "step":
        field = draw(st.sampled_from(["action", "label", "params", "on_failure", "timeout", "<whole>"]))
        if field == "<whole>":
            target_phase["steps"][s] = value if value != "<delete>" else None
            return raw, Place(phase=p, step=s)
        if f"step.{field}" in SPECIAL and draw(st.booleans()):
            value = draw(st.sampled_from(SPECIAL[f"step.{field}"]))
        _set(target_step, field, value)
        return raw, Place(phase=p, step=s)
    params = target_step["params"]
    field = draw(st.sampled_from([*params.keys(), "unknown_param"]))
    _set(params, field, value)
    return raw, Place(phase=p, step=s, in_params=True)


def _set(mapping: dict[str, Any], field: str, value: Any) -> None:
    if value == "<delete>":
        mapping.pop(field, None)
    else:
        mapping[field] = value


def phase_label(raw: Any, index: int) -> str:
    """How a problem names phase ``index``: by its key when it has a usable one, else ``#index``."""
    phase_ = raw["phases"][index] if isinstance(raw.get("phases"), list) else None
    key = phase_.get("key") if isinstance(phase_, dict) else None
    return key if isinstance(key, str) and key else f"#{index}"


# ── Checks ──────────────────────────────────────────────────────────────────


def check_problems(error: DefinitionError, file: str | None) -> None:
    assert error.problems, "a DefinitionError with no problem in it"
    for problem in error.problems:
        assert isinstance(problem, Problem)
        assert isinstance(problem.message, str) and problem.message.strip(), (
            f"a problem with no message: {problem!r}"
        )
        assert problem.file == file, f"{problem!r} does not name the file"
        assert problem.step is None or problem.phase is not None, (
            f"{problem!r} names a step but not its phase"
        )
        assert str(problem).strip()


def names_the_place(error: DefinitionError, raw: dict[str, Any], place: Place) -> bool:
    problems = error.problems
    if place.field is not None:
        return any(
            p.phase is None
            and p.field is not None
            and (p.field == place.field or p.field.startswith(place.field + "."))
            for p in problems
        ) or (place.field == "phases" and any(p.phase is not None for p in problems))
    assert place.phase is not None
    label = phase_label(raw, place.phase)
    located = [p for p in problems if p.phase == label]
    if place.step is None:
        # Two phases with one key is a fault of the pair, named by the key in the message.
        return bool(located) or any("phase keys must be unique" in p.message for p in problems)
    step_problems = [p for p in located if p.step == place.step]
    if place.in_params:
        return any((p.field or "").startswith("params") for p in step_problems)
    return bool(step_problems)


async def verify_dispatch(definition: defs.EventDefinition) -> list[str]:
    """Every step as its action would take it, in verify mode (nothing is sent)."""
    refused = []
    for each_phase in definition.phases:
        for index, each_step in enumerate(each_phase.steps):
            for scope in definition.run_scopes():
                envelope = Envelope(
                    actor=None,
                    idempotency_key="k" * 40,
                    params=dict(each_step.params),
                    run_id=1,
                    scope=scope,
                    step_id=1,
                    verify=True,
                )
                outcome = await perform(REGISTRY, envelope, each_step.action)
                if outcome.outcome not in ("done", "parked"):
                    refused.append(f"{each_phase.key} step {index}: {outcome.outcome}: {outcome.error}")
    return refused


def check_runnable(definition: defs.EventDefinition) -> None:
    refused = asyncio.run(verify_dispatch(definition))
    assert not refused, f"validated, yet its actions refuse it: {refused}"
    for scope in definition.run_scopes():
        key = definition.concurrency_key_for(scope)
        assert key is None or len(key) <= CONCURRENCY_KEY_MAX, f"concurrency key {key!r} overflows its column"
    json.dumps(definition.model_dump(mode="json"), allow_nan=False)
    assert defs.from_spec(json.loads(definition.canonical_json())) == definition


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


YAML_ALPHABET = string.ascii_letters + string.digits + " :-[]{}#&*!|>'\"%@`,?\n\t.\\"


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
    published = await catalog.publish(engine, definition, clock.now(), source=FILE, actor="author")
    async with engine.connect() as conn:
        stored = (
            await conn.execute(sa.select(versions.c.spec).where(versions.c.id == published.version_id))
        ).scalar_one()
    assert defs.from_spec(stored) == definition, "the stored version is not the definition published"
    after_publish = await snapshot(engine)
    result = await Controls(engine, clock=clock).start(definition.key, actor="author")
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
    assert (await world.controls.cancel(cancelled, reason="seeding", actor="seed")).ok
    run_ids = [parked, paused, done, tomorrow, leased, cancelled, held]
    step_ids = [int(r["id"]) for run_id in run_ids for r in await world.steps_of(run_id)]
    async with engine.connect() as conn:
        keys = list((await conn.execute(sa.select(definitions.c.key))).scalars().all())
    return Seeded(run_ids, step_ids, keys)


ACTORS = st.one_of(st.none(), st.text(max_size=100), st.sampled_from(["gm", "alice (123456789012345678)"]))
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
