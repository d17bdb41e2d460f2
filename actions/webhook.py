"""``webhook.post``: JSON to a receiver of the game's, signed, once per step.

* **Where.** The step names a target by alias (``webhooks:`` in the config,
  ``wiring.game_targets``); the signing secret comes from the environment variable it names.
* **Signed** by the Standard Webhooks scheme (standardwebhooks.com): ``webhook-id`` is the step's
  idempotency key, ``webhook-timestamp`` the Unix time of this attempt, and
  ``webhook-signature`` is ``v1,`` + base64 of HMAC-SHA256(secret, ``id.timestamp.body``). The
  key is also sent as ``Idempotency-Key``: a retry, or a repeat after a crash between the request
  and the settle, carries the same key, so a receiver that remembers keys acts once.
* **Answers.** 2xx is done (the answer's first ``BODY_MAX`` bytes kept on the step); 5xx, a
  timeout or a connection that fails is transient (the runner retries); any other status is
  terminal with the receiver's text. Redirects are not followed (a 3xx is terminal): a step's
  request goes where the config says, not where an answer points. The timeout is the target's,
  cut to the step's budget.
* **Undo.** A step may give ``undo`` (a body): the answer then says how to undo it, and a cancel
  with cleanup posts that body to the same target (``runner.engine.cleanup``).
* **Rehearsal.** A rehearsal run sends nothing: the step says what it would have sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

from actions.messaging import Describe
from runner.registry import Action, Envelope
from runner.states import AnswerKey
from wiring.game_targets import WebhookTarget

ACTION_ID = "webhook.post"
BUDGET_MS = 15_000
# What is kept of a receiver's answer (and read of it at most).
BODY_MAX = 4096
# The request body is bounded too: a step's JSON, not a file.
REQUEST_MAX = 64 * 1024
# Left of the step's budget for the settle after the request.
MARGIN_SECONDS = 1.0


class WebhookParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str = Field(description="a webhook target alias from the config (webhooks:)")
    body: dict[str, Any] = Field(default_factory=dict, description="the JSON object to send")
    undo: dict[str, Any] | None = Field(
        default=None, description="the JSON object that undoes it, sent by a cancel with cleanup"
    )


@dataclass(frozen=True)
class Answer:
    status: int
    text: str


class Transport(Protocol):
    async def post(self, url: str, body: bytes, headers: Mapping[str, str], seconds: float) -> Answer: ...


class AiohttpTransport:
    """One aiohttp session per request: steps are rare, and a session outliving its loop is a
    warning at shutdown."""

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], seconds: float) -> Answer:
        limit = aiohttp.ClientTimeout(total=seconds)
        async with (
            aiohttp.ClientSession(timeout=limit) as session,
            session.post(url, data=body, headers=dict(headers), allow_redirects=False) as response,
        ):
            raw = await response.content.read(BODY_MAX)
            return Answer(response.status, raw.decode("utf-8", "replace"))


# A rehearsal's front end showing what a step would have sent: run id, step id, scope, words.
WouldSend = Callable[[int, int, str, str], Awaitable[None]]


def signature(secret: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers_for(key: str, body: bytes, secret: bytes | None, now: float | None = None) -> dict[str, str]:
    timestamp = int(now if now is not None else time.time())
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": key,
        "webhook-id": key,
        "webhook-timestamp": str(timestamp),
    }
    if secret is not None:
        headers["webhook-signature"] = signature(secret, key, timestamp, body)
    return headers


def _terminal(error: str) -> dict[str, Any]:
    return {AnswerKey.OK: False, AnswerKey.RETRY: False, AnswerKey.ERROR: error[:500]}


def webhook_action(
    targets: Mapping[str, WebhookTarget],
    describe: Describe,
    *,
    transport: Transport | None = None,
    environ: Mapping[str, str] | None = None,
    budget_ms: int = BUDGET_MS,
    rehearsed: WouldSend | None = None,
) -> Action[WebhookParams]:
    """``rehearsed``: where a rehearsal run shows what it would have sent (the console's)."""
    sender = transport or AiohttpTransport()

    async def perform(envelope: Envelope, params: WebhookParams) -> dict[str, Any]:
        target = targets.get(params.target)
        known = ", ".join(sorted(targets)) or "none are configured"
        missing = f"no webhook target {params.target!r} in the config's webhooks ({known})"
        body = json.dumps(params.body, separators=(",", ":"), sort_keys=True).encode()
        if len(body) > REQUEST_MAX:
            return _terminal(f"the body is {len(body)} bytes; a webhook step sends at most {REQUEST_MAX}")
        undo = (
            {"action": ACTION_ID, "params": {"target": params.target, "body": params.undo}}
            if params.undo is not None
            else None
        )
        if not envelope.verify:
            context = await describe(envelope.run_id, envelope.step_id)
            if context is not None and context.rehearsal:
                # Sent nowhere, so neither the target nor its secret is needed: a rehearsal works
                # on a machine they were never put on, and says what a live run would lack.
                shown = {"would_post": params.target, "body": params.body}
                if rehearsed is not None:
                    said = json.dumps(params.body, ensure_ascii=False)[:500]
                    lacking = "" if target is not None else f"; a live run would fail: {missing}"
                    what = f"would post to webhook {params.target}: {said}{lacking}"
                    await rehearsed(envelope.run_id, envelope.step_id, envelope.scope, what)
                return {AnswerKey.OK: True, AnswerKey.OUTPUT: shown, AnswerKey.UNDO: undo}
        if target is None:
            return _terminal(missing)
        secret = target.secret(environ)
        if target.secret_env and secret is None:
            return _terminal(
                f"webhook target {params.target!r}: the environment variable {target.secret_env} is not set"
            )
        if envelope.verify:
            return {AnswerKey.OK: True}
        timeout = max(min(target.timeout_seconds, budget_ms / 1000 - MARGIN_SECONDS), 0.5)
        try:
            answer = await sender.post(
                target.url, body, headers_for(envelope.idempotency_key, body, secret), timeout
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            # Transient: the runner tries again with the same key.
            return {
                AnswerKey.OK: False,
                AnswerKey.ERROR: f"webhook {params.target}: {type(exc).__name__}: {exc}"[:500],
            }
        kept = {"status": answer.status, "answer": answer.text[:BODY_MAX]}
        if 200 <= answer.status < 300:
            return {AnswerKey.OK: True, AnswerKey.OUTPUT: kept, AnswerKey.UNDO: undo}
        said = f"webhook {params.target} answered {answer.status}: {answer.text[:300]}"
        if answer.status >= 500 or answer.status == 429:
            return {AnswerKey.OK: False, AnswerKey.ERROR: said, AnswerKey.OUTPUT: kept}
        if 300 <= answer.status < 400:
            said += " (redirects are not followed: point the config at the final address)"
        return _terminal(said) | {AnswerKey.OUTPUT: kept}

    return Action(
        id=ACTION_ID,
        label="Post to a webhook",
        risk="moderate",
        reversible="automatic",
        version=1,
        budget_ms=budget_ms,
        params_model=WebhookParams,
        perform=perform,
        description="Posts signed JSON to a receiver of the game's, once per step (Idempotency-Key).",
    )
