"""Issue 26 item 3: ``/event validate`` of a 244 KB upload listing 37,406 sign-up options was
answered after 18.6 s, and for those seconds every click, tick and lease renewal of the bot
waited. The upload is now read and checked in a process of its own (``bot.cogs.publishing._checks``), with
a time cap, in simcord through the real bot.

The check is held in its process (``tests.support.big_uploads.held_check``) until the test lets
it go, so what the bot does meanwhile is seen without a clock: the ticker ticks."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from pathlib import Path

import pytest
from simcord import assert_error

from bot.cogs.publishing import _flow as publishing
from bot.errors import BotError
from tests.bot.conftest import Sim, raid_spec
from tests.bot.test_publish import answer, as_file, command, definitions_tables, pub
from tests.support.big_uploads import held_check, options_list

__all__ = ["pub"]


async def _appears(path: Path) -> None:
    """Wait (real time, in a thread: simcord's clock stands still) until ``path`` exists."""

    def wait() -> None:
        for _ in range(3000):
            if path.exists():
                return
            time.sleep(0.01)
        raise AssertionError(f"{path.name} never appeared: the check did not start")

    await asyncio.to_thread(wait)


async def test_defect_upload_37406_options_is_refused_by_its_limit_while_the_bot_ticks(
    pub: Sim, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The upload of issue 26 is answered with the 20-option limit, named at its field; while
    it is being checked, in a process other than the bot's, a tick runs to the end on the
    bot's loop."""
    started, release = tmp_path / "started", tmp_path / "release"
    monkeypatch.setattr(
        publishing, "_read_and_check", functools.partial(held_check, str(started), str(release))
    )
    monkeypatch.setattr(publishing, "CHECK_SECONDS", 120.0)  # this test is not about the cap
    big = options_list(37_406).encode()
    assert len(big) < publishing.MAX_UPLOAD_BYTES
    validating = asyncio.ensure_future(command(pub, "validate", ("big.yaml", big)))
    await _appears(started)
    assert int(started.read_text()) != os.getpid(), "checked in the bot's own process"
    ticks = pub.bot.ticker.ticks
    await pub.bot.ticker.tick_once()
    assert pub.bot.ticker.ticks == ticks + 1, "a tick ran while the upload was being checked"
    assert not validating.done()
    release.touch()
    reply = answer(await validating).content
    assert "field 'signup.options': 37406 options; a sign-up may have at most 20" in reply


async def test_an_upload_past_the_time_cap_is_refused_and_nothing_is_stored(
    pub: Sim, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A check that has not answered within ``CHECK_SECONDS`` is killed and the member told the
    file took too long to check; ``/event publish`` stores nothing and offers no button."""
    started = tmp_path / "started"
    never = str(tmp_path / "never")
    monkeypatch.setattr(publishing, "_read_and_check", functools.partial(held_check, str(started), never))
    monkeypatch.setattr(publishing, "CHECK_SECONDS", 0.5)
    before = await definitions_tables(pub.engine)
    result = await command(pub, "publish", as_file(raid_spec()))
    reply = answer(result)
    assert (
        "raid.yaml took more than 0.5 s to check" in reply.content and "Nothing was stored" in reply.content
    )
    assert_error(pub.env, BotError)
    assert reply.message.components == [], "no Publish button"
    assert await definitions_tables(pub.engine) == before
    with pytest.raises(ProcessLookupError):
        os.kill(int(started.read_text()), 0)  # the check's process is gone
