"""``rcon.command`` against a real Source RCON server on loopback (issue 29 item 3): the registry
package ``rcon-server`` speaks the protocol's server side (login, auth response, command value),
as a Minecraft or ARK server would; the action's answers are classified as the runner needs them
(a reply is done and kept, a refused password terminal and named, a server that cannot be
reached transient, a command sent and never answered terminal, since RCON has no idempotency key).
The runner-level tests drive real runs on SQLite and MariaDB (the ``world`` fixture)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from rcon_server.rcon_connection import RCONConnection
from rcon_server.rcon_packet import RCONPacket
from rcon_server.rcon_server import RCONServer

from actions.rcon import REPLY_MAX, rcon_action, shown_reply
from runner.dispatch import perform
from runner.history import Actor
from runner.registry import ActionRegistry, Envelope
from runner.schema import run_undos
from runner.states import ActionOutcome, CleanupStatus, StepStatus, UndoStatus
from runner.views.step_context import StepContext
from tests.runner.test_cleanup import waits_for_a_human
from tests.support.actions import build_action
from tests.support.world import World, phase, step
from wiring.config import Config
from wiring.game_targets import RconServer

PASSWORD = "correct horse battery staple"
ENVIRON = {"GAME_RCON_PASSWORD": PASSWORD}
KEY = "k" * 40
MOD = Actor("1", "Mod")


class Game(RCONServer):
    """A game's RCON port: records each command it was sent and answers as a game would."""

    def __init__(self) -> None:
        super().__init__(bind=("127.0.0.1", 0), password=PASSWORD)
        self.commands: list[str] = []
        self.silent = False
        self.reply = "Summoned new Shadow Warlord"
        self.port = 0
        self._server: asyncio.Server | None = None

    def handle_execcommand(self, packet: RCONPacket, connection: RCONConnection) -> None:
        self.commands.append(packet.body)
        if not self.silent:
            answer = RCONPacket(packet.id, RCONPacket.SERVERDATA_RESPONSE_VALUE, self.reply)
            connection.send_packet(answer)

    async def start(self) -> None:
        # ``listen()`` prints and serves for ever; the same protocol factory, on a free port.
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.connection_factory, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for connection in list(self.connections):
            if connection._transport is not None:
                connection._transport.close()
        await self._server.wait_closed()


@pytest.fixture
async def game() -> AsyncIterator[Game]:
    served = Game()
    await served.start()
    try:
        yield served
    finally:
        await served.stop()


def servers(port: int, **extra: Any) -> dict[str, RconServer]:
    return {"survival": RconServer(host="127.0.0.1", port=port, password_env="GAME_RCON_PASSWORD", **extra)}


def free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port: int = free.getsockname()[1]
    return port


def describer(rehearsal: bool = False) -> Any:
    async def describe(run_id: int, step_id: int) -> StepContext:
        return StepContext("invasion", "Invasion", "battle", "Battle", 0, "spawn", "", rehearsal)

    return describe


def registry(
    targets: dict[str, RconServer],
    *,
    rehearsal: bool = False,
    environ: dict[str, str] = ENVIRON,
    shown: list[str] | None = None,
) -> ActionRegistry:
    async def rehearsed(run_id: int, step_id: int, scope: str, what: str) -> None:
        assert shown is not None
        shown.append(what)

    found = ActionRegistry()
    action = rcon_action(
        targets,
        describer(rehearsal),
        environ=environ,
        budget_ms=3000,
        rehearsed=rehearsed if shown is not None else None,
    )
    found.register("rcon", [action])
    return found


async def send(found: ActionRegistry, params: dict[str, Any], *, verify: bool = False) -> Any:
    return await perform(found, Envelope(None, KEY, params, 1, "", 1, verify), "rcon.command")


SPAWN = {"server": "survival", "command": "/spawn shadow-warlord gate-north"}


async def test_a_command_reaches_the_server_and_its_reply_is_kept(game: Game) -> None:
    answered = await send(registry(servers(game.port)), SPAWN)
    assert answered.outcome is ActionOutcome.DONE
    assert game.commands == ["/spawn shadow-warlord gate-north"]
    assert answered.output == {
        "server": "survival",
        "command": "/spawn shadow-warlord gate-north",
        "reply": "Summoned new Shadow Warlord",
    }


async def test_a_long_reply_is_kept_only_up_to_its_cap_and_colour_codes_go(game: Game) -> None:
    game.reply = "x" * (REPLY_MAX * 2)
    answered = await send(registry(servers(game.port)), SPAWN)
    assert answered.outcome is ActionOutcome.DONE and len(answered.output["reply"]) == REPLY_MAX
    assert shown_reply("\u00a7aThere are \u00a7l3\u00a7r players online") == "There are 3 players online"


async def test_a_wrong_password_is_terminal_and_names_the_server(game: Game) -> None:
    answered = await send(registry(servers(game.port), environ={"GAME_RCON_PASSWORD": "guess"}), SPAWN)
    assert answered.outcome is ActionOutcome.TERMINAL
    assert "rcon survival" in (answered.error or "") and "refused the password" in (answered.error or "")
    assert "GAME_RCON_PASSWORD" in (answered.error or "")
    assert game.commands == [], "nothing was run after a refused login"


async def test_nothing_listening_is_transient() -> None:
    answered = await send(registry(servers(free_port())), SPAWN)
    assert answered.outcome is ActionOutcome.RETRY
    assert "rcon survival" in (answered.error or "") and "not sent" in (answered.error or "")


async def test_a_server_that_never_answers_the_login_is_transient() -> None:
    """Accepts the connection and says nothing: nothing was sent, so a retry is safe."""

    hung_up = asyncio.Event()

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up and closes
        writer.close()
        await writer.wait_closed()
        hung_up.set()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        answered = await send(registry(servers(port, timeout_seconds=0.3)), SPAWN)
        await asyncio.wait_for(hung_up.wait(), 5)
    finally:
        server.close()
        await server.wait_closed()
    assert answered.outcome is ActionOutcome.RETRY and "no answer in time" in (answered.error or "")


async def test_defect_a_command_sent_and_never_answered_is_not_sent_again_on_its_own(game: Game) -> None:
    """RCON carries no idempotency key: a retry after the command went out could spawn a second
    Warlord. The step fails and says to check the game; staff retry it if it did not happen."""
    game.silent = True
    answered = await send(registry(servers(game.port, timeout_seconds=0.3)), SPAWN)
    assert answered.outcome is ActionOutcome.TERMINAL
    assert "the command was sent but no answer in time" in (answered.error or "")
    assert game.commands == ["/spawn shadow-warlord gate-north"]


async def test_an_unknown_server_or_an_unset_password_is_refused_by_the_preflight(game: Game) -> None:
    answered = await send(registry(servers(game.port)), SPAWN | {"server": "creative"}, verify=True)
    assert answered.outcome is ActionOutcome.TERMINAL
    assert "no RCON server 'creative'" in (answered.error or "") and "survival" in (answered.error or "")
    answered = await send(registry(servers(game.port), environ={}), SPAWN, verify=True)
    assert answered.outcome is ActionOutcome.TERMINAL
    assert "GAME_RCON_PASSWORD is not set" in (answered.error or "")
    assert (await send(registry(servers(game.port)), SPAWN, verify=True)).outcome is ActionOutcome.DONE
    assert game.commands == [], "a preflight sends nothing"


async def test_a_command_that_is_not_one_line_or_too_long_is_refused() -> None:
    found = registry(servers(free_port()))
    answered = await send(found, SPAWN | {"command": "/say hi\n/op me"})
    assert answered.outcome is ActionOutcome.TERMINAL and "one line" in (answered.error or "")
    answered = await send(found, SPAWN | {"command": "/say " + "x" * 1500})
    assert answered.outcome is ActionOutcome.TERMINAL and "1446 bytes" in (answered.error or "")


async def test_a_rehearsal_connects_to_nothing_and_says_what_it_would_send(game: Game) -> None:
    shown: list[str] = []
    answered = await send(registry(servers(game.port), rehearsal=True, environ={}, shown=shown), SPAWN)
    assert answered.outcome is ActionOutcome.DONE
    assert answered.output == {"would_send": "survival", "command": "/spawn shadow-warlord gate-north"}
    assert shown == ["would send to rcon survival: /spawn shadow-warlord gate-north"]
    assert game.commands == [], "nothing reached the server, and no password was needed"


async def test_the_password_is_in_no_answer_log_or_config_repr(
    game: Game, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answers = [
        await send(registry(servers(game.port)), SPAWN),
        await send(registry(servers(game.port), environ={"GAME_RCON_PASSWORD": PASSWORD + "!"}), SPAWN),
        await send(registry(servers(free_port())), SPAWN),
    ]
    assert [a.outcome for a in answers] == [ActionOutcome.DONE, ActionOutcome.TERMINAL, ActionOutcome.RETRY]
    said = " ".join(f"{a.error} {a.output}" for a in answers)
    # The test server logs the login packets it receives; nothing of ours does.
    ours = [r.getMessage() for r in caplog.records if r.name != "RCONServer"]
    assert PASSWORD not in said and not any(PASSWORD in line for line in ours)
    config = Config.model_validate(
        {"database_url": "sqlite+aiosqlite:///x.sqlite3", "guild_id": 1} | {"rcon": servers(game.port)}
    )
    assert PASSWORD not in repr(config) and "GAME_RCON_PASSWORD" in repr(config.rcon)


def test_a_password_written_where_its_variable_name_goes_is_refused() -> None:
    with pytest.raises(ValueError, match="name of an environment variable"):
        RconServer(host="mc.example.com", password_env="hunter2 !")


# The runner's side, on SQLite and MariaDB: what a run's step keeps, and a cancel's undo.


def rcon_world(world: World, port: int) -> None:
    world.register(
        rcon_action(servers(port), describer(), environ=ENVIRON, budget_ms=3000),
        owner="rcon",
    )


def spawn_step(**extra: Any) -> dict[str, Any]:
    return step("rcon.command", SPAWN | extra, label="Bring out the Shadow Warlord")


async def test_a_run_keeps_the_reply_on_its_step(world: World, game: Game) -> None:
    rcon_world(world, game.port)
    run_id = await world.seed_run([phase("battle", spawn_step())])
    await world.tick()
    [done] = await world.steps_of(run_id)
    assert done["status"] == StepStatus.DONE
    assert done["result"]["reply"] == "Summoned new Shadow Warlord"
    assert game.commands == ["/spawn shadow-warlord gate-north"]


async def test_a_run_fails_its_step_at_once_on_a_wrong_password(world: World, game: Game) -> None:
    world.register(
        rcon_action(servers(game.port), describer(), environ={"GAME_RCON_PASSWORD": "guess"}),
        owner="rcon",
    )
    run_id = await world.seed_run([phase("battle", spawn_step())])
    await world.tick()
    [failed] = await world.steps_of(run_id)
    assert failed["status"] == StepStatus.FAILED and failed["attempts"] == 1
    assert "refused the password" in failed["last_error"]


async def test_a_run_retries_a_step_whose_server_is_not_listening(world: World) -> None:
    rcon_world(world, free_port())
    run_id = await world.seed_run([phase("battle", spawn_step())])
    await world.tick()
    [waiting] = await world.steps_of(run_id)
    assert waiting["status"] == StepStatus.PENDING and waiting["attempts"] == 1
    assert "not sent" in waiting["last_error"]


async def test_a_cancel_with_cleanup_sends_the_undo_command_once(world: World, game: Game) -> None:
    rcon_world(world, game.port)
    # The GM's cue after the spawn holds the run in flight until staff cancel it.
    world.register(build_action("game.wait_for_gm", waits_for_a_human))
    run_id = await world.seed_run(
        [phase("battle", spawn_step(undo="/despawn shadow-warlord"), step("game.wait_for_gm"))]
    )
    await world.tick()
    async with world.engine.connect() as conn:
        [entry] = (await conn.execute(sa.select(run_undos).where(run_undos.c.run_id == run_id))).mappings()
    assert entry["action_id"] == "rcon.command" and entry["status"] == UndoStatus.RECORDED
    assert entry["params"] == {"server": "survival", "command": "/despawn shadow-warlord"}
    assert (await world.controls.cancel(run_id, reason="too few players", actor=MOD, cleanup=True)).ok
    await world.tick()
    await world.tick()
    assert game.commands == ["/spawn shadow-warlord gate-north", "/despawn shadow-warlord"]
    assert (await world.run(run_id))["cleanup_status"] == CleanupStatus.DONE
