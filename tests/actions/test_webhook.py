"""``webhook.post`` against a real HTTP server on loopback (issue 29 item 2): the receiver checks
the Standard Webhooks signature and remembers each Idempotency-Key, as a game's receiver would;
the action's answers are classified as the runner needs them (2xx done, 5xx / timeout /
connection refused transient, 4xx and 3xx terminal with the receiver's words)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from actions.webhook import BODY_MAX, webhook_action
from runner.dispatch import classify, perform
from runner.registry import ActionRegistry, Envelope
from runner.states import ActionOutcome
from runner.views.step_context import StepContext
from wiring.game_targets import WebhookTarget

SECRET = "whsec_" + base64.b64encode(b"a game server's shared secret").decode()
KEY = "a" * 40


@dataclass
class Receiver:
    """A game's webhook receiver: verifies the signature, acts once per Idempotency-Key."""

    url: str = ""
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    acted: dict[str, dict[str, Any]] = field(default_factory=dict)
    answer_status: int = 200
    delay: float = 0.0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        signed = f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + body
        key = base64.b64decode(SECRET.removeprefix("whsec_"))
        expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        valid = hmac.compare_digest(expected, request.headers.get("webhook-signature", ""))
        self.deliveries.append({"key": request.headers.get("Idempotency-Key"), "valid": valid})
        if self.delay:
            await asyncio.sleep(self.delay)
        if not valid:
            return web.Response(status=401, text="bad signature")
        if self.answer_status != 200:
            return web.Response(status=self.answer_status, text=f"the game says {self.answer_status}")
        self.acted.setdefault(request.headers["Idempotency-Key"], json.loads(body))
        return web.json_response({"spawned": True})

    async def elsewhere(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/hook")

    async def huge(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="x" * (BODY_MAX * 10))


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/hook", found.handle)
    app.router.add_post("/moved", found.elsewhere)
    app.router.add_post("/huge", found.huge)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    found.url = f"http://127.0.0.1:{port}"
    try:
        yield found
    finally:
        await runner.cleanup()


def context(rehearsal: bool = False) -> StepContext:
    return StepContext("invasion", "Invasion", "gate", "Gate", 0, "reward", "", rehearsal)


def registry(targets: dict[str, WebhookTarget], *, rehearsal: bool = False) -> ActionRegistry:
    async def describe(run_id: int, step_id: int) -> StepContext:
        return context(rehearsal)

    found = ActionRegistry()
    environ = {"REWARDS_SECRET": SECRET}
    found.register("webhook", [webhook_action(targets, describe, environ=environ, budget_ms=3000)])
    return found


def envelope(params: dict[str, Any], *, verify: bool = False, key: str = KEY) -> Envelope:
    return Envelope(None, key, params, run_id=1, scope="", step_id=1, verify=verify)


def target(receiver: Receiver, path: str = "/hook", **extra: Any) -> dict[str, WebhookTarget]:
    return {"rewards": WebhookTarget(url=receiver.url + path, secret_env="REWARDS_SECRET", **extra)}


async def post(found: ActionRegistry, params: dict[str, Any], **options: Any) -> Any:
    return await perform(found, envelope(params, **options), "webhook.post")


async def test_a_signed_post_is_verified_by_the_receiver_and_done(receiver: Receiver) -> None:
    outcome = await post(
        registry(target(receiver)), {"target": "rewards", "body": {"give": "gold", "to": "raiders"}}
    )
    assert outcome.outcome is ActionOutcome.DONE
    assert receiver.deliveries == [{"key": KEY, "valid": True}]
    assert receiver.acted == {KEY: {"give": "gold", "to": "raiders"}}
    assert outcome.output["status"] == 200


async def test_defect_a_crash_between_send_and_settle_resends_the_same_key_and_the_receiver_acts_once(
    receiver: Receiver,
) -> None:
    """The runner performs a step again, with the same idempotency key, when its process died
    after the request went out and before the settle: the receiver's dedup makes it once."""
    found = registry(target(receiver))
    for _ in range(3):
        assert (
            await post(found, {"target": "rewards", "body": {"give": "gold"}})
        ).outcome is ActionOutcome.DONE
    assert [d["key"] for d in receiver.deliveries] == [KEY, KEY, KEY]
    assert list(receiver.acted) == [KEY], "acted on once"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (500, ActionOutcome.RETRY),
        (503, ActionOutcome.RETRY),
        (429, ActionOutcome.RETRY),
        (400, ActionOutcome.TERMINAL),
        (404, ActionOutcome.TERMINAL),
    ],
)
async def test_a_server_error_is_transient_and_a_refusal_terminal_with_its_words(
    receiver: Receiver, status: int, outcome: ActionOutcome
) -> None:
    receiver.answer_status = status
    answered = await post(registry(target(receiver)), {"target": "rewards", "body": {}})
    assert answered.outcome is outcome
    assert f"the game says {status}" in (answered.error or "")


async def test_a_redirect_is_not_followed(receiver: Receiver) -> None:
    answered = await post(registry(target(receiver, "/moved")), {"target": "rewards", "body": {}})
    assert answered.outcome is ActionOutcome.TERMINAL and "redirects are not followed" in (
        answered.error or ""
    )
    assert receiver.deliveries == [], "nothing reached the address the redirect named"


async def test_a_receiver_that_does_not_answer_in_time_is_transient(receiver: Receiver) -> None:
    receiver.delay = 5.0
    answered = await post(registry(target(receiver, timeout_seconds=0.5)), {"target": "rewards", "body": {}})
    assert answered.outcome is ActionOutcome.RETRY and "Timeout" in (answered.error or "")


async def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    nowhere = {"rewards": WebhookTarget(url=f"http://127.0.0.1:{port}/hook", secret_env="REWARDS_SECRET")}
    answered = await post(registry(nowhere), {"target": "rewards", "body": {}})
    assert answered.outcome is ActionOutcome.RETRY


async def test_a_huge_answer_is_kept_only_up_to_its_cap(receiver: Receiver) -> None:
    answered = await post(registry(target(receiver, "/huge")), {"target": "rewards", "body": {}})
    assert answered.outcome is ActionOutcome.DONE and len(answered.output["answer"]) <= BODY_MAX


async def test_an_unknown_target_or_an_unset_secret_is_terminal_and_named(receiver: Receiver) -> None:
    answered = await post(registry(target(receiver)), {"target": "loot", "body": {}}, verify=True)
    assert answered.outcome is ActionOutcome.TERMINAL and "no webhook target 'loot'" in (answered.error or "")
    unset = {"rewards": WebhookTarget(url=receiver.url + "/hook", secret_env="NOT_SET_ANYWHERE")}
    answered = await post(registry(unset), {"target": "rewards", "body": {}})
    assert answered.outcome is ActionOutcome.TERMINAL and "NOT_SET_ANYWHERE is not set" in (
        answered.error or ""
    )
    assert receiver.deliveries == []


async def test_a_rehearsal_sends_nothing_and_says_what_it_would_send(receiver: Receiver) -> None:
    answered = await post(
        registry(target(receiver), rehearsal=True), {"target": "rewards", "body": {"give": "gold"}}
    )
    assert answered.outcome is ActionOutcome.DONE
    assert answered.output == {"would_post": "rewards", "body": {"give": "gold"}}
    assert receiver.deliveries == []
    # A rehearsal needs no secret: it works on a machine the secret was never put on.
    unset = {"rewards": WebhookTarget(url=receiver.url + "/hook", secret_env="NOT_SET_ANYWHERE")}
    answered = await post(registry(unset, rehearsal=True), {"target": "rewards", "body": {}})
    assert answered.outcome is ActionOutcome.DONE and receiver.deliveries == []


async def test_a_step_with_an_undo_answers_how_to_undo_it(receiver: Receiver) -> None:
    params = {"target": "rewards", "body": {"spawn": "warlord"}, "undo": {"despawn": "warlord"}}
    answered = await post(registry(target(receiver)), params)
    assert answered.undo == {
        "action": "webhook.post",
        "params": {"target": "rewards", "body": {"despawn": "warlord"}},
    }
    assert classify({"ok": True}, "webhook.post").undo is None


def test_a_target_with_credentials_in_its_url_or_no_http_is_refused() -> None:
    with pytest.raises(ValueError, match="user or password"):
        WebhookTarget(url="https://admin:hunter2@game.example/hook")
    with pytest.raises(ValueError, match="http"):
        WebhookTarget(url="ftp://game.example/hook")
