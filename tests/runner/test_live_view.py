"""What a run's live message shows, read without Discord (``runner.views.live``), and where
the message is (``live_message_of``, which the staff log links to)."""

from __future__ import annotations

from runner import views
from runner.sql import live_messages as live_sql
from tests.support.world import T0, World, phase, step


async def test_live_message_of_names_the_posted_message_only(world: World) -> None:
    """None before the row exists and while it has no message (claimed, or its message was
    deleted); the channel and message ids once the post is stored."""
    world.register(world.scripted.action("test.noop"))
    run_id = await world.seed_run([phase("main", step("test.noop"))])
    assert await views.live_message_of(world.engine, run_id) is None
    async with world.engine.begin() as conn:
        assert await live_sql.claim_new(conn, run_id, "42", "me", T0, T0)
        assert not await live_sql.claim_new(conn, run_id, "42", "other", T0, T0), "one row per run"
    assert await views.live_message_of(world.engine, run_id) is None
    async with world.engine.begin() as conn:
        assert not await live_sql.store_posted(
            conn, run_id, "other", message_id="7", digest="d", closed=False, now=T0
        ), "only the claim's holder stores its post"
        assert await live_sql.store_posted(
            conn, run_id, "me", message_id="7", digest="d", closed=False, now=T0
        )
    assert await views.live_message_of(world.engine, run_id) == (42, 7)
    async with world.engine.begin() as conn:
        await live_sql.forget_message(conn, run_id, "7", T0)
        row = await live_sql.get(conn, run_id)
    assert await views.live_message_of(world.engine, run_id) is None
    assert row is not None and row["posts"] == 1, "the next post's nonce differs from the deleted one's"
