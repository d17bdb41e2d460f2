"""What a run's live message shows, read without Discord (``bridge.live``), and where
the message is (``live_message_of``, which the staff log links to)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.live import LiveMessages, LiveView, PostedLink, Waiting, WaitKind, live_message_of, live_view
from bridge.sql import live_messages as live_sql
from runner import signups
from runner.catalog import VersionCache
from runner.history import Actor
from runner.schema import run_log
from tests.signups.booking import T0 as BOOKED
from tests.signups.booking import book, member
from tests.support.world import T0, World, later, phase, step


async def test_live_message_of_names_the_posted_message_only(world: World) -> None:
    """None before the row exists and while it has no message (claimed, or its message was
    deleted); the channel and message ids once the post is stored."""
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", step("test.noop"))])
    assert await live_message_of(world.engine, run_id) is None
    async with world.engine.begin() as conn:
        assert await live_sql.claim_new(conn, run_id, "42", "me", T0, T0)
        assert not await live_sql.claim_new(conn, run_id, "42", "other", T0, T0), "one row per run"
    assert await live_message_of(world.engine, run_id) is None
    async with world.engine.begin() as conn:
        assert not await live_sql.store_posted(
            conn, run_id, "other", message_id="7", digest="d", closed=False, now=T0
        ), "only the claim's holder stores its post"
        assert await live_sql.store_posted(
            conn, run_id, "me", message_id="7", digest="d", closed=False, now=T0
        )
    assert await live_message_of(world.engine, run_id) == (42, 7)
    async with world.engine.begin() as conn:
        await live_sql.forget_message(conn, run_id, "7", T0)
        row = await live_sql.get(conn, run_id)
    assert await live_message_of(world.engine, run_id) is None
    assert row is not None and row["posts"] == 1, "the next post's nonce differs from the deleted one's"


async def live(world: World, run_id: int, at: dt.datetime = T0) -> LiveView:
    view = await live_view(world.engine, run_id, world.runner.versions, at)
    assert view is not None
    return view


async def test_the_live_view_tells_the_phase_the_step_the_gm_it_waits_for_and_who_acted(world: World) -> None:
    """Phase i of n with its label, the current step named as everywhere (its id and label),
    "waiting for a GM" on a parked cue, and the last human action with who: the start by a
    person, then the GM's Confirm on that step."""
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.noop"))
    world.scripted["test.cue"].answer = {
        "ok": True,
        "await": "human",
        "posted": {"channel_id": "5", "message_id": "6"},
    }
    run_id = await world.seed_run(
        [
            phase("doors", step("test.cue", label="Open the gates"), label="Doors"),
            phase("end", step("test.noop", label="Close"), label="The end"),
        ]
    )
    await world.tick(T0)
    view = await live(world, run_id)
    cue_id = view.run.phases[0].steps[0].id
    assert (view.phase_index, view.phase_count, view.phase_label) == (1, 2, "Doors")
    assert view.step == f"step {cue_id} (Open the gates)"
    assert view.waiting == Waiting(WaitKind.GM)
    assert view.last_action is not None and view.last_action.what == "start"
    assert view.last_action.by == Actor(None, "seed")

    gm = Actor("42", "gm")
    assert (await world.controls.confirm(cue_id, actor=gm, note="gates open")).ok
    await world.tick(later(1))
    view = await live(world, run_id, later(1))
    assert view.ended and view.run.status == "completed"
    assert view.waiting is None and view.ending is not None and view.ending.status == "completed"
    action = view.last_action
    assert action is not None
    assert (action.what, action.by, action.step, action.note) == (
        "confirm",
        gm,
        f"step {cue_id} (Open the gates)",
        "gates open",
    )


async def test_a_retry_shows_its_time_and_error_and_a_pause_says_by_whom_or_after_what(world: World) -> None:
    """A transient failure: the step waits for its retry at its due time, with the error. A
    pause by a person names them; a pause after a step failed names no one and gives the error."""
    world.register(world.scripted.action("test.flaky"), world.scripted.action("test.noop"))
    world.scripted["test.flaky"].answers = [{"ok": False, "error": "Discord answered 500"}]
    world.scripted["test.flaky"].answer = {"ok": False, "retry": False, "error": "Missing Access"}
    run_id = await world.seed_run([phase("main", step("test.flaky", on_failure="pause"), step("test.noop"))])
    await world.tick(T0)
    view = await live(world, run_id)
    waiting = view.waiting
    assert waiting is not None and waiting.kind is WaitKind.RETRY
    assert waiting.until is not None and waiting.until > T0
    assert waiting.error is not None and "500" in waiting.error

    await world.tick(waiting.until)  # the retry fails for good: on_failure pauses the run
    view = await live(world, run_id, waiting.until)
    assert view.run.status == "paused"
    assert view.waiting is not None and view.waiting.kind is WaitKind.PAUSED
    assert view.waiting.by is None and "Missing Access" in (view.waiting.error or "")
    assert view.step is not None and view.step.startswith("step ")

    mod = Actor("7", "mod")
    assert (await world.controls.retry(run_id, actor=mod)).ok
    assert (await world.controls.pause(run_id, actor=mod)).ok
    view = await live(world, run_id, waiting.until)
    assert view.waiting == Waiting(WaitKind.PAUSED, by=mod)
    assert view.last_action is not None and (view.last_action.what, view.last_action.by) == ("pause", mod)


async def test_a_blocked_run_names_the_run_holding_its_key_and_the_schedule_is_no_person(
    world: World,
) -> None:
    """A run waiting for a concurrency key says which run holds which key; a run started by the
    schedule has no last human action."""
    world.register(world.scripted.action("test.cue"), world.scripted.action("test.noop"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    holder = await world.seed_run([phase("main", step("test.cue"))], concurrency_key="invasion:Yew")
    await world.tick(T0)
    waiting = await world.seed_run([phase("main", step("test.noop"))], concurrency_key="invasion:Yew")
    await world.tick(T0)
    view = await live(world, waiting)
    assert view.run.status == "scheduled"
    async with world.engine.connect() as conn:
        assert await live_sql.followable(conn, waiting), "blocked: staff see why it has not started"
    assert view.waiting == Waiting(WaitKind.BLOCKED, holder_run_id=holder, key="invasion:Yew")

    async with world.engine.begin() as conn:
        await conn.execute(
            sa.update(run_log).where(run_log.c.run_id == waiting).values(actor_name="schedule", actor_id=None)
        )
    assert (await live(world, waiting)).last_action is None, "the schedule's start is nobody's hand"


async def test_posted_links_are_the_steps_discord_messages_in_order(world: World) -> None:
    """Each step that posted a Discord message gives a link (channel and message ids); a post
    named by alias (the rehearsal's console) gives none."""
    world.register(world.scripted.action("test.post"))
    world.scripted["test.post"].answers = [
        {"ok": True, "output": {"posted": {"channel_id": "11", "message_id": "12"}}},
        {"ok": True, "output": {"posted": {"channel_id": "announcements", "message_id": "1"}}},
        {"ok": True, "output": {"posted": {"channel_id": "21", "message_id": "22"}}},
    ]
    run_id = await world.seed_run(
        [
            phase(
                "main",
                step("test.post", label="A"),
                step("test.post", label="B"),
                step("test.post", label="C"),
            )
        ]
    )
    await world.tick(T0)
    view = await live(world, run_id)
    ids = [s.id for s in view.run.phases[0].steps]
    assert view.posted == [
        PostedLink(f"step {ids[0]} (A)", 11, 12),
        PostedLink(f"step {ids[2]} (C)", 21, 22),
    ]


async def test_an_unposted_message_is_taken_by_one_process_once_its_claim_runs_out(world: World) -> None:
    """A row claimed by a process that died before posting is free once its claim expires, and
    then only one taker wins; the start-up reconcile finds it (open) and the runs in flight with
    no row at all."""
    world.register(world.scripted.action("test.cue"))
    world.scripted["test.cue"].answer = {"ok": True, "await": "human"}
    claimed = await world.seed_run([phase("main", step("test.cue"))])
    unfollowed = await world.seed_run([phase("main", step("test.cue"))])
    not_started = await world.seed_run([phase("main", step("test.cue"))], scheduled_for=later(60_000))
    await world.tick(T0)
    async with world.engine.begin() as conn:
        assert await live_sql.claim_new(conn, claimed, "42", "dead", later(1000), T0)
        assert await live_sql.claim_unposted(conn, claimed, "me", later(60_000), T0) is None, "still claimed"
        before = await live_sql.claim_unposted(conn, claimed, "me", later(60_000), later(1000))
        assert before is not None and before["claimed_by"] == "dead"
        assert await live_sql.claim_unposted(conn, claimed, "other", later(60_000), later(2000)) is None
        assert await live_sql.open_run_ids(conn) == [claimed]
        assert await live_sql.unfollowed_in_flight(conn, 10) == [unfollowed]
        assert not_started not in await live_sql.unfollowed_in_flight(conn, 10)
        assert await live_sql.followable(conn, unfollowed), "started: it gets a message"
        assert not await live_sql.followable(conn, not_started), "not started: nothing to follow yet"
        await live_sql.close(conn, claimed, later(3000))
        assert await live_sql.open_run_ids(conn) == []
        assert await live_sql.claim_unposted(conn, claimed, "me", later(60_000), later(90_000)) is None, (
            "a closed message is never posted again"
        )


async def test_an_open_live_messages_sign_up_counts_move_with_each_join_and_leave(
    engine: AsyncEngine,
) -> None:
    """What the live loop reads each pass to see a click (a join or a leave writes no run-log
    line): the counts per option and status of the runs whose live message is open, none for a
    run without one or whose message is closed; and the live view carries the list."""
    run_id = await book(engine, {"options": {"tank": 1, "dps": 2}})
    store = LiveMessages(engine, "me")
    for n, option in enumerate(["tank", "tank", "dps"]):
        await signups.join(engine, run_id, *member(n), option, (), BOOKED)
    assert await store.signup_counts() == {}, "no live message yet"
    async with engine.begin() as conn:
        assert await live_sql.claim_new(conn, run_id, "42", "me", BOOKED, BOOKED)
    assert await store.signup_counts() == {
        run_id: frozenset({("tank", "confirmed", 1), ("tank", "waitlisted", 1), ("dps", "confirmed", 1)})
    }
    await signups.leave(engine, run_id, *member(1), BOOKED)
    assert await store.signup_counts() == {
        run_id: frozenset({("tank", "confirmed", 1), ("dps", "confirmed", 1)})
    }
    view = await live_view(engine, run_id, VersionCache(), BOOKED)
    assert view is not None and view.signup_list is not None
    assert [(o.name, len(o.confirmed), len(o.waitlisted)) for o in view.signup_list.options] == [
        ("tank", 1, 0),
        ("dps", 1, 0),
    ]
    async with engine.begin() as conn:
        await live_sql.close(conn, run_id, BOOKED)
    assert await store.signup_counts() == {}, "a closed message is not followed"
