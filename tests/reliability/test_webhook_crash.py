"""Crash: a runner process is SIGKILLed between a webhook's send and its settle, 20 times (issue 29).

One run of 20 ``webhook.post`` steps, each to a real receiver on loopback that verifies the
signature and acts once per ``Idempotency-Key`` (the Standard Webhooks receiver the docs show).
The first time a key arrives, the receiver holds its answer and the parent SIGKILLs the runner
that sent it: the game got the request, the step was never settled. A fresh runner takes the
step over once its lease runs out and sends it again, with the same key; the receiver sees the
key again and does not act twice. Twenty kills later: every key acted on once, none lost, every
send signed, every step done with the key its row holds.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from runner import catalog
from runner.clock import utcnow
from runner.db import create_engine
from runner.definitions import EventDefinition
from runner.history import Actor
from tests.reliability.child_runner import WEBHOOK_SECRET_ENV
from tests.reliability.harness import Child, all_steps, run_statuses
from tests.support.definitions import event, phase, step

KILLS = 20
SECRET = "whsec_" + base64.b64encode(b"the reliability receiver's secret").decode()
# Short leases: a dead runner's step is taken over about two seconds after the kill.
CHILD = {"lease_seconds": 0.5, "margin_seconds": 0.5, "budget_ms": 1500, "interval": 0.1}

# SIGKILLs child runner processes, twenty times.
pytestmark = pytest.mark.slow


@dataclass
class Receiver:
    """Verifies each request's signature; acts once per key; holds a key's first answer."""

    url: str = ""
    arrivals: list[tuple[str, bool]] = field(default_factory=list)
    acted: dict[str, bytes] = field(default_factory=dict)
    first_seen: asyncio.Queue[str] = field(default_factory=asyncio.Queue)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        signed = f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + body
        secret = base64.b64decode(SECRET.removeprefix("whsec_"))
        expected = "v1," + base64.b64encode(hmac.new(secret, signed, hashlib.sha256).digest()).decode()
        key = request.headers["Idempotency-Key"]
        valid = hmac.compare_digest(expected, request.headers.get("webhook-signature", ""))
        first = all(seen != key for seen, _ in self.arrivals)
        self.arrivals.append((key, valid))
        if not valid:
            return web.Response(status=401, text="bad signature")
        if first:
            # The game has it; the sender is killed before it hears so, and never settles.
            self.first_seen.put_nowait(key)
            await asyncio.sleep(30)
        self.acted.setdefault(key, body)
        return web.json_response({"done": True})


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/hook", found.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    found.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield found
    finally:
        await runner.cleanup()


async def test_twenty_kills_between_send_and_settle_act_on_every_key_once_and_lose_none(
    backend: str, database_url: str, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WEBHOOK_SECRET_ENV, SECRET)
    engine = create_engine(database_url)
    posts = [
        step("webhook.post", {"target": "game", "body": {"wave": n}}, on_failure=None) for n in range(KILLS)
    ]
    spec = event("rewards", phase("main", *posts))
    await catalog.publish(
        engine, EventDefinition.model_validate(spec), utcnow(), actor=Actor(None, "reliability")
    )
    children: list[Child] = []
    started = time.monotonic()
    try:
        async with engine.begin() as conn:
            current = await catalog.current(conn, "rewards", catalog.VersionCache())
            run_id = await catalog.create_run(
                conn, current, "", utcnow(), utcnow(), actor=Actor(None, "reliability")
            )
        assert run_id is not None
        for kill in range(KILLS + 1):
            child = await Child.start(
                database_url, f"hook-{backend}-{kill}", tmp_path, webhook_url=receiver.url, **CHILD
            )
            children.append(child)
            await child.ready()
            if kill == KILLS:
                break
            await asyncio.wait_for(receiver.first_seen.get(), 60)
            await child.kill()

        async def completed() -> bool:
            return (await run_statuses(engine)).get(run_id) == "completed"

        deadline = time.monotonic() + 60
        while not await completed():
            assert time.monotonic() < deadline, "the run did not complete after the last kill"
            await asyncio.sleep(0.05)
        rows = [r for r in await all_steps(engine) if r["run_id"] == run_id]
        assert await children[-1].stop() == 0, children[-1].stderr_tail()
    finally:
        for child in children:
            await child.kill()
        await engine.dispose()

    keys = {str(r["idempotency_key"]) for r in rows}
    arrived = Counter(key for key, _ in receiver.arrivals)
    assert all(valid for _, valid in receiver.arrivals), "every send is signed"
    assert len(rows) == KILLS and {r["status"] for r in rows} == {"done"}
    # Each key reached the receiver twice (the killed send and the one after), was acted on once.
    assert set(receiver.acted) == keys, "no key lost"
    assert set(arrived) == keys and set(arrived.values()) == {2}, arrived
    assert [child.killed for child in children] == [True] * KILLS + [False]
    assert time.monotonic() - started < 240
    assert os.environ[WEBHOOK_SECRET_ENV] == SECRET
