"""``/event signups export`` (issue 28 item 3): staff get a run's sign-up list as a CSV file,
ephemerally; a member without a staff role gets nothing."""

from __future__ import annotations

import csv
import io

import simcord

from bot.errors import BotError
from tests.bot.conftest import Sim
from tests.bot.test_signups import book


def answered(result: object) -> object:
    replies = [m for m in [result.response, *result.followups] if m is not None]  # type: ignore[attr-defined]
    return replies[-1]


async def test_staff_get_the_sign_up_list_as_csv_with_a_formula_name_quoted(sim: Sim) -> None:
    run_id = await book(sim)
    message = sim.announcements.last_message
    await sim.player.click(message, label="tank")
    result = await sim.mod.slash(sim.staff, "event signups export", run=run_id)
    reply = answered(result)
    assert reply.content.startswith(f"📋 Sign-ups of run {run_id}")  # type: ignore[attr-defined]
    [file] = reply.attachments  # type: ignore[attr-defined]
    assert file.filename == f"signups-run-{run_id}.csv"
    rows = list(csv.reader(io.StringIO((await file.read()).decode("utf-8-sig"))))
    assert rows[0][:4] == ["member_id", "member_name", "option", "state"]
    assert [r[2:4] for r in rows[1:]] == [["tank", "confirmed"]]
    assert rows[1][0] == str(sim.player.id)


async def test_a_member_without_a_staff_role_gets_no_file(sim: Sim) -> None:
    run_id = await book(sim)
    result = await sim.player.slash(sim.staff, "event signups export", run=run_id)
    reply = answered(result)
    assert reply.attachments == []  # type: ignore[attr-defined]
    assert result.response is not None and result.response.ephemeral


async def test_a_run_without_sign_ups_is_refused_in_words(sim: Sim) -> None:
    result = await sim.mod.slash(sim.staff, "event signups export", run=999)
    assert "has no sign-up list" in answered(result).content  # type: ignore[attr-defined]
    simcord.assert_error(sim.env, BotError)
