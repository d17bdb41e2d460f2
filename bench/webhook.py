"""Issue 29 item 2: ``webhook.post`` steps per second against a real receiver on loopback.

Eight runs of ``steps`` webhook steps each, ticked by one runner until all complete, every step a
signed POST to an aiohttp receiver in the same process that verifies the signature and records
the Idempotency-Key (a game's receiver). The baseline is the same runs of no-op steps, measured
in the same run on the same backend: the ratio is what the HTTP round trip, the signing and the
receiver cost on top of the runner's own work per step. Every key must reach the receiver exactly
once (no retries happen against a receiver that answers 200).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from actions.webhook import webhook_action
from bench.backends import Backend, fresh_engine
from bench.results import Options, Result, median
from bench.workloads import bench_action, count_runs
from runner import catalog
from runner import definitions as defs
from runner.clock import utcnow
from runner.controls import Controls
from runner.engine import Runner, RunnerSettings
from runner.history import Actor
from runner.registry import Action, ActionRegistry
from runner.views.step_context import StepContext
from tests.support.actions import ok
from tests.support.definitions import event, phase, step
from wiring.game_targets import WebhookTarget

RUNS = 8
SECRET = b"bench secret"


class Receiver:
    def __init__(self) -> None:
        self.keys: list[str] = []
        self.bad = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        h = request.headers
        signed = f"{h['webhook-id']}.{h['webhook-timestamp']}.".encode() + body
        expected = "v1," + base64.b64encode(hmac.new(SECRET, signed, hashlib.sha256).digest()).decode()
        if not hmac.compare_digest(expected, h.get("webhook-signature", "")):
            self.bad += 1
            return web.Response(status=401)
        self.keys.append(h["Idempotency-Key"])
        return web.json_response({"ok": True})


async def _not_a_rehearsal(run_id: int, step_id: int) -> StepContext:
    return StepContext("bench", "Bench", "main", "Main", 0, None, "", False)


async def _steps_per_second(
    backend: Backend, steps_per_run: int, action: Action, params: dict[str, Any]
) -> tuple[float, int]:
    registry = ActionRegistry()
    registry.register(action.id.split(".")[0], [action])
    async with fresh_engine(backend) as engine:
        spec = event(
            "hooks",
            phase("main", *(step(action.id, params) for _ in range(steps_per_run))),
            scopes=[f"run-{i}" for i in range(RUNS)],
        )
        await catalog.publish(engine, defs.validate(spec, registry), utcnow())
        started = await Controls(engine).start("hooks", actor=Actor(None, "bench"))
        assert started.ok, started.message
        runner = Runner(engine, registry, settings=RunnerSettings(), owner="bench")
        dispatched = 0
        began = time.perf_counter()
        while await count_runs(engine, "completed") < RUNS:
            report = await runner.tick()
            dispatched += report.steps_dispatched
        elapsed = time.perf_counter() - began
        await runner.aclose()
    return dispatched / elapsed, dispatched


async def _with_receiver(work: Callable[[str, Receiver], Awaitable[Any]]) -> Any:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    site_runner = web.AppRunner(app, access_log=None)
    await site_runner.setup()
    site = web.TCPSite(site_runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        return await work(f"http://127.0.0.1:{port}/hook", receiver)
    finally:
        await site_runner.cleanup()


async def run(backend: Backend, options: Options) -> list[Result]:
    steps_per_run = 10 if options.quick else 40
    repeats = 1 if options.quick else min(options.repeats, 3)
    noop_rates: list[float] = []
    hook_rates: list[float] = []
    exactly_once = True
    for _ in range(repeats):
        rate, _count = await _steps_per_second(backend, steps_per_run, bench_action("bench.noop", ok), {})
        noop_rates.append(rate)

        async def hooks(url: str, receiver: Receiver) -> float:
            nonlocal exactly_once
            targets = {"game": WebhookTarget(url=url, secret_env="BENCH_SECRET")}
            action = webhook_action(targets, _not_a_rehearsal, environ={"BENCH_SECRET": SECRET.decode()})
            rate, count = await _steps_per_second(
                backend, steps_per_run, action, {"target": "game", "body": {"give": "gold"}}
            )
            exactly_once = (
                exactly_once and receiver.bad == 0 and len(set(receiver.keys)) == len(receiver.keys) == count
            )
            return rate

        hook_rates.append(await _with_receiver(hooks))
    noop, hook = median(noop_rates), median(hook_rates)
    total = RUNS * steps_per_run
    return [
        Result(
            benchmark=f"webhook.post steps/s, {RUNS} runs x {steps_per_run} signed POSTs to a loopback receiver",
            backend=backend.name,
            measured=f"{hook:.0f}/s",
            baseline=f"no-op steps {noop:.0f}/s",
            ratio=hook / noop if noop else None,
            target="for the record; every key delivered once",
            passed=exactly_once,
            details=[
                f"{total} steps per measurement, {repeats} repeat(s); medians. Each webhook step is one "
                "signed POST (HMAC-SHA256, Standard Webhooks) answered 200 by an aiohttp receiver in "
                "the same process that verifies the signature; every Idempotency-Key arrived once: "
                f"{exactly_once}.",
            ],
        )
    ]
