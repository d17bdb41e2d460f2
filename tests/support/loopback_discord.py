"""A real HTTP server on a loopback port standing in for Discord's REST API, and a port where
nothing listens: the two peers a start-up test needs that simcord (which replaces discord.py's
HTTP layer in-process) cannot be, since the bot under test runs as its own process.

The bot is pointed at either with ``EVENTBOT_DISCORD_API`` (``bot.startup.API_BASE_ENV``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

API_PATH = "/api/v10"
GATEWAY_PATH = "/gateway"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    at: float  # time.monotonic() when the answer was sent


class LoopbackDiscord:
    """Answers ``routes[(method, path)]`` = (status, JSON body), path after ``/api/v10``; 404
    otherwise. Each request is recorded, with the moment it was answered.

    With ``ready`` (the READY event's data), ``/gateway`` is a gateway too: HELLO, then READY
    after the client identifies (or, with ``close_code``, the connection closed with that
    code), heartbeats acknowledged; each frame the client sends is kept in ``received``."""

    def __init__(
        self,
        routes: Mapping[tuple[str, str], tuple[int, Any]],
        *,
        ready: dict[str, Any] | None = None,
        close_code: int | None = None,
    ) -> None:
        self.routes = dict(routes)
        self.ready = ready
        self.close_code = close_code
        self.received: list[dict[str, Any]] = []
        self.requests: list[Seen] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PATH}"

    @property
    def gateway(self) -> str:
        return f"ws://127.0.0.1:{self.port}{GATEWAY_PATH}"

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"op": 10, "d": {"heartbeat_interval": 45_000}, "s": None, "t": None})
        async for message in socket:
            frame = json.loads(message.data)
            self.received.append(frame)
            if frame["op"] == 2 and self.close_code is not None:  # IDENTIFY, refused
                await socket.close(code=self.close_code, message=b"Authentication failed.")
            elif frame["op"] == 2:  # IDENTIFY
                await socket.send_json({"op": 0, "t": "READY", "s": 1, "d": self.ready})
            elif frame["op"] == 1:  # HEARTBEAT
                await socket.send_json({"op": 11, "d": None, "s": None, "t": None})
        return socket

    async def _answer(self, request: web.Request) -> web.Response:
        path = request.path.removeprefix(API_PATH)
        status, body = self.routes.get(
            (request.method, path), (404, {"message": "404: Not Found", "code": 0})
        )
        # discord.py decodes a body as JSON only under exactly this content type (no charset).
        response = web.Response(
            body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json"}
        )
        self.requests.append(Seen(request.method, path, time.monotonic()))
        return response

    async def _start(self) -> None:
        app = web.Application()
        if self.ready is not None:
            app.router.add_get(GATEWAY_PATH, self._gateway)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def __enter__(self) -> LoopbackDiscord:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *_: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port that refuses every connection: bound, so nothing else can take it while
    the test runs, but never listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
    finally:
        sock.close()
