"""A model-based test of the runner's state machines (issue 8).

A hypothesis ``RuleBasedStateMachine`` drives the real ``Runner``, ``Controls`` and
``catalog.publish`` on one database per example, interleaving: ticks by one runner or two at
once; every control (start, pause, resume, cancel, retry, skip, confirm) and a cue button click
on an arbitrary step id; two controls pressed at the same moment; action outcomes (done, hold,
park, transient, terminal, a throw, a hang past the budget, a runner dropped mid-step with its
leases left to expire, and a control pressed *while the action is out*); clock moves from a
second to a day; and publishing a new version. After every rule it reads the whole database and
checks it against ``tests/support/model.py``: the edges of ``../shared/DESIGN.md``, what each
control's answer must have changed (a "no" changes nothing), no open step or live cue on an
ended run, every cron occurrence a run or missed, ``attempts`` only growing except by retry, no
step dispatched twice unless its lease expired and never under a new key.

SQLite runs in the default suite; MariaDB (marker ``mariadb``) with a smaller budget. Each test
prints ``model: N examples, M rule firings``. ``EVENTBOT_MODEL_EXAMPLES`` sets the budget;
in CI (``CI`` set) the examples are derandomized, so a red build is reproducible.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from runner import catalog
from runner.clock import ManualClock
from runner.controls import ControlResult, Controls
from runner.db import create_engine
from runner.definitions import EventDefinition
from runner.engine import Runner, RunnerSettings
from runner.engine.advance import Advance
from runner.history import Actor
from runner.registry import Action, ActionRegistry, Envelope
from runner.schema import RUN_IN_FLIGHT, metadata, steps
from tests.conftest import IN_CI
from tests.reliability.harness import drop_mariadb_database, fresh_mariadb_database, run_in_thread
from tests.support import model
from tests.support.actions import build_action
from tests.support.tiers import examples
from tests.support.world import T0

ACTOR = Actor(None, "model")
# Real milliseconds: only a hang waits this long, and a control pressed mid-dispatch (a few small
# reads and one transaction) must fit inside it.
BUDGET_MS = 250
# Off the cron's quarter-hour grid, so the first publish is not itself an occurrence.
START = T0 + dt.timedelta(seconds=7)
# The clock never runs further than this from the start: the runner's 7-day lookback never bites.
MAX_ELAPSED = 3 * 24 * 3600
SETTINGS = RunnerSettings(
    # Every due run of a tick is advanced at once, so a tick whose runner was dropped is frozen
    # (nothing of it left running in the background) as soon as only the dropped dispatches remain.
    concurrent_runs=100_000,
)

# Model-based: hundreds of examples, each a database's worth of ticks and controls.
pytestmark = pytest.mark.slow


# ── The events ──────────────────────────────────────────────────────────────


def _step(action: str, on_failure: str) -> dict[str, Any]:
    return {"action": action, "on_failure": on_failure, "params": {}}


def definition_spec(key: str, version: int) -> dict[str, Any]:
    """Three events: two manual ones sharing a concurrency key (one of them in two scopes) and an
    every-quarter-hour cron. Each new version changes the title, and alpha's also its steps."""
    if key == "alpha":
        closing = [_step("model.act", "skip"), _step("model.act", "abort_run")]
        if version % 2 == 0:
            closing.append(_step("gm.cue", "skip"))
        phases = [
            {
                "key": "open",
                "label": "Open",
                "steps": [_step("model.act", "pause"), _step("gm.cue", "pause")],
            },
            {"key": "close", "label": "Close", "steps": closing},
        ]
        extra: dict[str, Any] = {"concurrency_key": "stage", "grace_seconds": 3600}
    elif key == "beta":
        phases = [
            {"key": "main", "label": "Main", "steps": [_step("gm.cue", "skip"), _step("model.act", "pause")]}
        ]
        extra = {"scopes": ["north", "south"], "concurrency_key": "stage", "grace_seconds": 3600}
    else:
        phases = [{"key": "main", "label": "Main", "steps": [_step("model.act", "skip")]}]
        extra = {"schedule": {"cron": "*/15 * * * *", "timezone": "UTC"}, "grace_seconds": 600}
    return {"key": key, "title": f"{key.title()} v{version}", "phases": phases, **extra}


KEYS = ("alpha", "beta", "tide")
SCOPES = {"alpha": [""], "beta": ["north", "south"], "tide": [""]}


# ── What an action does when dispatched ─────────────────────────────────────

KINDS = ("ok", "ok", "hold", "transient", "terminal", "throw", "hang", "drop")
DURING = (
    None,
    None,
    "cancel",
    "cancel",
    "pause",
    "resume",
    "retry",
    "confirm",
    "skip",
    "click_confirm",
    "click_skip",
    "skip_next",
)


@dataclass(frozen=True)
class Outcome:
    kind: str = "ok"
    during: str | None = None  # a control pressed while the action is out
    hold: int = 300


OUTCOMES = st.builds(
    Outcome,
    kind=st.sampled_from(KINDS),
    during=st.sampled_from(DURING),
    hold=st.sampled_from((300, 30, 3600)),
)
PICK = st.integers(0, 10_000)
STEP_FILTERS = ("parked", "pending", "parked", "failed", "leased", "any", "missing")
# Mostly seconds to minutes (within grace windows, past retry backoffs and leases), sometimes
# hours: past the half-day mark where occurrences are worked out again.
SECONDS = st.sampled_from((1, 16, 31, 61, 300, 901, 1, 5, 31, 3600, 13 * 3600, 6 * 3600, 86_400))


class CountedAdvance(Advance):
    """The real advance stage, counting the runs it is advancing for its runner."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner

    async def advance_one(self, ctx: Any, run: Any, report: Any) -> bool:
        self.runner.active += 1
        try:
            return await super().advance_one(ctx, run, report)
        finally:
            self.runner.active -= 1


class ModelRunner(Runner):
    """The real runner, counting the runs it is advancing: a runner whose only runs still in hand
    are dispatches that will never return is dropped, and the machine stops waiting for it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.active = 0
        self.blocked = 0
        self.advance = CountedAdvance(self)
        self.stages = tuple(self.advance if isinstance(stage, Advance) else stage for stage in self.stages)

    def frozen(self) -> bool:
        return self.blocked > 0 and self.active == self.blocked


@dataclass
class Backend:
    name: str
    fresh: Callable[[int], Awaitable[AsyncEngine]]
    cleanup: Callable[[int], None] = lambda _n: None
    examples: int = 0
    firings: Counter[str] = field(default_factory=Counter)


# ── The machine ─────────────────────────────────────────────────────────────


class RunnerMachine(RuleBasedStateMachine):
    backend: ClassVar[Backend]

    def __init__(self) -> None:
        super().__init__()
        self.backend.examples += 1
        self.number = self.backend.examples
        self.fired = self.backend.firings
        self.loop = asyncio.new_event_loop()
        self.engine = self._run(self.backend.fresh(self.number))
        self.clock = ManualClock(START)
        self.elapsed = 0
        self.registry = ActionRegistry()
        self.registry.register("model", [self._action("model.act"), self._action("gm.cue")])
        self.ledger = model.Ledger()
        self.controls = Controls(self.engine, clock=self.clock)
        self.spawned = 0
        self.runners = [self._new_runner(slot) for slot in range(2)]
        self.dead: list[asyncio.Future[Any]] = []
        self.never = asyncio.Event()
        self.tearing_down = False
        self.script: list[Outcome] = [Outcome()]
        self.dispatched: Counter[int] = Counter()
        self.ticked_at: dt.datetime | None = None
        self.versions = model.Versions({}, {}, {}, {})
        self.version_numbers: Counter[str] = Counter()
        self.definition_ids: dict[str, int] = {}
        for key in KEYS:
            self._publish(key)
        self.snap = self._run(model.read(self.engine))

    def teardown(self) -> None:
        # Dropped dispatches are let go (they answer "terminal", and so does every dispatch from
        # here on) and their ticks run to their end: a task left pending would be finalised by
        # the garbage collector in the middle of some later example.
        self.tearing_down = True
        self.never.set()
        try:
            if self.dead:
                self._run(asyncio.wait(self.dead, timeout=30))
                for task in self.dead:
                    if not task.done():
                        task.cancel()
                self._run(asyncio.wait(self.dead))
            self._run(self.engine.dispose())
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()
            self.backend.cleanup(self.number)

    def _run(self, awaitable: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(awaitable)

    def _new_runner(self, slot: int) -> ModelRunner:
        extra: dict[str, Any] = {}
        if "close_parked" in inspect.signature(Runner).parameters:
            # The runner's hook for a cue posted on a run that ended meanwhile (where it has one).
            extra["close_parked"] = self._close_parked
        self.spawned += 1
        owner = f"model-{slot}-{self.spawned}"
        return ModelRunner(
            self.engine, self.registry, clock=self.clock, owner=owner, settings=SETTINGS, **extra
        )

    async def _close_parked(self, run_id: int, step_id: int, output: Any, reason: str) -> None:
        self.ledger.closed.add(step_id)

    def _publish(self, key: str) -> None:
        self.version_numbers[key] += 1
        spec = definition_spec(key, self.version_numbers[key])
        definition = EventDefinition.model_validate(spec)
        published = self._run(catalog.publish(self.engine, definition, self.clock.now(), actor=ACTOR))
        self.definition_ids[key] = published.definition_id
        self.versions.phases[published.version_id] = {
            p.key: [(s.action, s.on_failure) for s in p.steps] for p in definition.phases
        }
        self.versions.current[published.definition_id] = published.version_id
        if published.changed:
            history = self.versions.history.setdefault(published.definition_id, [])
            history.append((self.clock.now(), published.version_id))
        self.versions.grace[published.definition_id] = definition.grace_seconds
        if "schedule" in spec and published.definition_id not in self.versions.cron:
            self.versions.cron[published.definition_id] = (spec["schedule"]["cron"], self.clock.now())

    # ── actions ──────────────────────────────────────────────────────────

    def _action(self, action_id: str) -> Action:
        async def perform(envelope: Envelope, params: Any) -> Any:
            return await self._perform(envelope, cue=action_id == "gm.cue")

        return build_action(action_id, perform, budget_ms=BUDGET_MS)

    async def _perform(self, envelope: Envelope, *, cue: bool) -> Any:
        if self.tearing_down:
            return {"ok": False, "retry": False, "error": "model: the example is over"}
        now = self.clock.now()
        async with self.engine.connect() as conn:
            row = (
                (await conn.execute(sa.select(steps).where(steps.c.id == envelope.step_id)))
                .mappings()
                .first()
            )
        dispatch = self.ledger.on_dispatch(
            dict(row) if row is not None else None, envelope.idempotency_key, now
        )
        count = self.dispatched[envelope.run_id]
        self.dispatched[envelope.run_id] += 1
        outcome = self.script[(envelope.run_id + count) % len(self.script)]
        self.fired[f"outcome {outcome.kind}"] += 1
        try:
            if outcome.during is not None:
                await self._press_during(outcome.during, envelope)
            if outcome.kind == "drop" and dispatch is not None:
                await self._drop(dispatch.owner)
            if outcome.kind == "hang":
                await asyncio.Event().wait()  # cut off by the budget
            if outcome.kind == "throw":
                raise RuntimeError("model: the action raised")
            if outcome.kind == "transient":
                return {"ok": False, "error": "model: transient"}
            if outcome.kind == "terminal":
                return {"ok": False, "retry": False, "error": "model: terminal"}
            if cue:
                self.ledger.posted.add(envelope.step_id)
                posted = {"channel_id": "1", "message_id": str(envelope.step_id), "channel_name": "gm"}
                return {"ok": True, "await": "human", "output": {"posted": posted}}
            if outcome.kind == "hold":
                return {"ok": True, "holdFor": outcome.hold}
            return {"ok": True}
        finally:
            if dispatch is not None and outcome.kind != "drop":
                dispatch.finished = True

    async def _drop(self, owner: str) -> None:
        """This runner dies here: the dispatch does not return, whatever cancels it (its budget
        included), until the example is over. Its leases are left to expire."""
        runner = next(r for r in self.runners if r.owner == owner)
        runner.blocked += 1
        self.fired["runner dropped"] += 1
        while not self.tearing_down:
            try:
                await self.never.wait()
            except asyncio.CancelledError:
                if self.tearing_down:
                    raise

    async def _press_during(self, kind: str, envelope: Envelope) -> None:
        run_id, target = envelope.run_id, envelope.step_id
        before = await model.read(self.engine, run_id)
        if kind == "skip_next":
            mine = before.steps[target]
            later = [
                s["id"]
                for s in before.steps.values()
                if s["phase"] == mine["phase"] and s["seq"] == mine["seq"] + 1
            ]
            if not later:
                return
            kind, target = "skip", later[0]
        elif kind in model.RUN_CONTROLS:
            target = run_id
        self.fired[f"during {kind}"] += 1
        try:
            result = await self._control(kind, target)
        except Exception as exc:
            self.ledger.violations.append(f"{kind}({target}) pressed mid-dispatch raised {exc!r}")
            return
        after = await model.read(self.engine, run_id)
        self.ledger.violations.extend(
            model.check_answer(kind, target, result.ok, result.message, before, after, whole=False)
        )

    # ── controls ─────────────────────────────────────────────────────────

    async def _control(self, kind: str, target: int) -> ControlResult:
        c = self.controls
        if kind == "pause":
            result = await c.pause(target, actor=ACTOR)
        elif kind == "resume":
            result = await c.resume(target, actor=ACTOR)
        elif kind == "cancel":
            result = await c.cancel(target, reason="the model says so", actor=ACTOR)
        elif kind == "retry":
            result = await c.retry(target, actor=ACTOR)
        elif kind == "confirm":
            result = await c.confirm(target, actor=ACTOR)
        elif kind == "skip":
            result = await c.skip(target, actor=ACTOR)
        else:
            verb = kind.removeprefix("click_")
            # What the cue button handler (bot/cogs/cues/_cog.py ``click``) calls: the cue-only control
            # where the controls have one, else confirm / skip as the handler used to.
            settle_cue = getattr(c, "settle_cue", None)
            if settle_cue is not None:
                result = await settle_cue(target, verb, actor=ACTOR)
            elif verb == "confirm":
                result = await c.confirm(target, actor=ACTOR)
            else:
                result = await c.skip(target, actor=ACTOR)
        if result.ok:
            if kind == "retry" and result.step_id is not None:
                self.ledger.requeued.add(result.step_id)
            # The front end edits every cue a control answers with (buttons off).
            self.ledger.closed.update(ref.step_id for ref in result.cues)
        return result

    async def _together(self, presses: list[tuple[str, int]]) -> list[Any]:
        return await asyncio.gather(*(self._control(k, t) for k, t in presses), return_exceptions=True)

    def _press(self, kind: str, target: int) -> None:
        before = self.snap
        result = self._run(self._control(kind, target))
        after = self._run(model.read(self.engine))
        problems = model.check_answer(kind, target, result.ok, result.message, before, after, whole=True)
        assert not problems, "\n".join(problems)

    def _pick_run(self, pick: int, live: bool) -> int | None:
        """A run by index; ``live``: one in flight that is due (not one of the cron's many future
        occurrences), when there is one."""
        now = self.clock.now()
        everything = sorted(self.snap.runs)
        due = [
            r
            for r in everything
            if self.snap.runs[r]["status"] in RUN_IN_FLIGHT and self.snap.runs[r]["scheduled_for"] <= now
        ]
        pool = due if live and due else everything
        return pool[pick % len(pool)] if pool else None

    def _pick_step(self, pick: int, which: str, run_id: int | None = None) -> int:
        rows = [s for s in self.snap.steps.values() if run_id is None or s["run_id"] == run_id]
        if which == "missing" or not rows:
            return max(self.snap.steps, default=0) + 1
        chosen = [s for s in rows if which == "any" or model.step_state(s) == which] or rows
        ids = sorted(s["id"] for s in chosen)
        return ids[pick % len(ids)]

    # ── rules ────────────────────────────────────────────────────────────

    @rule(who=st.sampled_from(("a", "b", "both")), script=st.lists(OUTCOMES, min_size=1, max_size=4))
    def tick(self, who: str, script: list[Outcome]) -> None:
        self.fired[f"tick {who}"] += 1
        self.script = script
        self.dispatched.clear()
        slots = {"a": [0], "b": [1], "both": [0, 1]}[who]
        self._run(self._tick(slots))
        self.ticked_at = self.clock.now()

    @rule(script=st.lists(OUTCOMES, min_size=1, max_size=3))
    def tick_again(self, script: list[Outcome]) -> None:
        """Ticks are what move runs: a second rule for them makes them twice as common."""
        self.tick("a", script)

    async def _tick(self, slots: list[int]) -> None:
        tasks = {slot: asyncio.ensure_future(self.runners[slot].tick()) for slot in slots}
        while True:
            waiting = [t for s, t in tasks.items() if not t.done() and not self.runners[s].frozen()]
            if not waiting:
                break
            await asyncio.wait(waiting, timeout=0.01)
        for slot, task in tasks.items():
            if task.done():
                task.result()  # a tick that raises is a failure
                continue
            self.dead.append(task)
            self.ledger.dead_owners.add(self.runners[slot].owner)
            self.runners[slot] = self._new_runner(slot)

    @precondition(lambda self: self.elapsed < MAX_ELAPSED)
    @rule(seconds=SECONDS)
    def advance_clock(self, seconds: int) -> None:
        self.fired["advance clock"] += 1
        self.clock.advance(seconds)
        self.elapsed += seconds

    @rule(key=st.sampled_from(("beta", "alpha")), scope=st.sampled_from((None, None, "north", "south")))
    def start(self, key: str, scope: str | None) -> None:
        self.fired["start"] += 1
        before = self.snap
        result = self._run(self.controls.start(key, scope=scope, actor=ACTOR))
        after = self._run(model.read(self.engine))
        known = SCOPES[key]
        wanted = known if scope is None else [scope]
        definition_id = self.definition_ids[key]
        now = self.clock.now()
        busy = [
            r
            for r in before.runs.values()
            if r["definition_id"] == definition_id
            and r["scope"] in wanted
            and r["status"] in RUN_IN_FLIGHT
            and r["scheduled_for"] <= now
        ]
        expected = scope in (None, *known) and not busy
        said = f"start({key}, {scope}) answered {result.ok} ({result.message!r})"
        assert result.ok == expected, f"{said}; the model says {expected}"
        created = [after.runs[r] for r in sorted(set(after.runs) - set(before.runs))]
        if not result.ok:
            assert (before.runs, before.steps, before.log) == (after.runs, after.steps, after.log), said
            return
        assert sorted(r["scope"] for r in created) == sorted(wanted), said
        assert all(r["status"] == "scheduled" for r in created), said

    @precondition(lambda self: bool(self.snap.runs))
    @rule(kind=st.sampled_from(model.RUN_CONTROLS), pick=PICK, live=st.booleans())
    def run_control(self, kind: str, pick: int, live: bool) -> None:
        self.fired[kind] += 1
        target = self._pick_run(pick, live)
        assert target is not None
        self._press(kind, target)

    @precondition(lambda self: bool(self.snap.steps))
    @rule(kind=st.sampled_from(model.STEP_CONTROLS), pick=PICK, which=st.sampled_from(STEP_FILTERS))
    def step_control(self, kind: str, pick: int, which: str) -> None:
        """Confirm and skip (the ``/event`` commands) and a cue button click, on any step id."""
        self.fired[kind] += 1
        self._press(kind, self._pick_step(pick, which))

    @precondition(lambda self: bool(self.snap.runs))
    @rule(
        first=st.sampled_from(("cancel", "pause", "resume", "retry")),
        second=st.sampled_from(("confirm", "click_confirm", "click_skip", "skip", "cancel", "pause")),
        pick=PICK,
        which=st.sampled_from(("parked", "pending", "failed", "any")),
    )
    def race(self, first: str, second: str, pick: int, which: str) -> None:
        """Two controls on one run at the same moment (a moderator and a GM)."""
        self.fired["race"] += 1
        run_id = self._pick_run(pick, live=True)
        assert run_id is not None
        targets = [
            run_id if kind in model.RUN_CONTROLS else self._pick_step(pick, which, run_id)
            for kind in (first, second)
        ]
        before = self.snap
        answers = self._run(self._together([(first, targets[0]), (second, targets[1])]))
        raised = [
            f"{k}({t}) raised {a!r}"
            for k, t, a in zip((first, second), targets, answers, strict=True)
            if isinstance(a, BaseException)
        ]
        assert not raised, "two controls at once: " + "; ".join(raised)
        after = self._run(model.read(self.engine))
        if not any(a.ok for a in answers):
            assert before.view(run_id) == after.view(run_id), (
                f"{first} and {second} both refused yet run {run_id} changed"
            )

    @rule(key=st.sampled_from(KEYS))
    def publish(self, key: str) -> None:
        self.fired["publish"] += 1
        self._publish(key)

    @invariant()
    def agrees_with_the_model(self) -> None:
        after = self._run(model.read(self.engine))
        problems = model.check_state(self.snap, after, self.ledger, self.versions, ticked_at=self.ticked_at)
        self.snap = after
        self.ticked_at = None
        assert not problems, "\n".join(problems)


# ── The tests ───────────────────────────────────────────────────────────────


def _budget(full: int) -> int:
    return int(os.environ.get("EVENTBOT_MODEL_EXAMPLES", examples(full)))


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=30,
        deadline=None,
        database=None,
        print_blob=True,
        derandomize=IN_CI,
        # No "explain" phase: it replays every failing example many more times, and each replay
        # is a database's worth of work.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _explore(backend: Backend, examples: int, capsys: pytest.CaptureFixture[str]) -> None:
    machine = type(f"RunnerOn{backend.name.title()}", (RunnerMachine,), {"backend": backend})
    run_state_machine_as_test(machine, settings=_settings(examples))
    firings = sum(n for k, n in backend.firings.items() if not k.startswith(("outcome", "during")))
    with capsys.disabled():
        print(f"\nmodel ({backend.name}): {backend.examples} examples, {firings} rule firings")
        print("  " + ", ".join(f"{k}: {n}" for k, n in sorted(backend.firings.items())))
    assert backend.examples > 0 and firings > 0


def test_the_runner_follows_its_model_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Random interleavings of ticks, controls, outcomes, drops, clock moves and publishes on
    SQLite; every state is checked against the model."""

    async def fresh(number: int) -> AsyncEngine:
        engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / f'model-{number}.sqlite3'}")
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        return engine

    def cleanup(number: int) -> None:
        for path in tmp_path.glob(f"model-{number}.sqlite3*"):
            path.unlink()

    _explore(Backend("sqlite", fresh, cleanup), _budget(120), capsys)


@pytest.fixture(scope="module")
def model_mariadb_url(mariadb_server: Any) -> Iterator[str]:
    name, url = run_in_thread(fresh_mariadb_database(mariadb_server))
    try:
        yield url
    finally:
        run_in_thread(drop_mariadb_database(mariadb_server, name))


@pytest.mark.mariadb
def test_the_runner_follows_its_model_on_mariadb(
    model_mariadb_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same machine on MariaDB, where two controls at once meet real row locks."""

    async def fresh(number: int) -> AsyncEngine:
        engine = create_engine(model_mariadb_url)
        async with engine.begin() as conn:
            # TRUNCATE (not DELETE) so ids start at 1 again: examples replay the same ids.
            await conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS=0")
            for table in metadata.sorted_tables:
                await conn.exec_driver_sql(f"TRUNCATE TABLE `{table.name}`")
            await conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS=1")
        return engine

    _explore(Backend("mariadb", fresh), _budget(40), capsys)
