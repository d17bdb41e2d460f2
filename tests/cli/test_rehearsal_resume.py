"""A crashed ``rehearse --database`` can be finished or cleared offline (defect 15 of issue 8):
``--resume`` carries on what an interrupted rehearsal left, ``--cancel`` ends it with a reason,
and each refuses a database with a live run. Each test is named for its defect and says what
happened before and what must happen now."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from rehearsal import RehearsalOptions, rehearse
from runner import views
from runner.clock import ManualClock, utcnow
from runner.controls import Controls
from runner.history import Actor
from runner.schema import run_log, runs, steps
from tests.cli.conftest import (
    EXAMPLES,
    Cli,
    announce,
    definition,
    on_database,
    sqlite_url,
    write_yaml,
)
from wiring.config import Config

TREASURE = EXAMPLES / "treasure-hunt.yaml"
INVASION = EXAMPLES / "invasion.yaml"


# ── defect 15: a crashed `rehearse --database` can be finished or cleared ───


def _stop_at_a_cue(cli: Cli, url: str, event: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an interrupted rehearsal leaves: runs in flight, parked at a GM cue."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert cli("rehearse", event, "--database", url, "--cues", "ask").code == 1


def test_defect_15_an_interrupted_rehearsal_is_carried_on_with_resume(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a rehearsal kept with --database that stopped early could only be refused ever
    after ("has 1 run(s) in flight"), and nothing offline could finish it. Now the refusal says
    what to do, and ``rehearse --database URL --resume`` drives the runs to the end."""
    url = sqlite_url(tmp_path / "kept.sqlite3")
    _stop_at_a_cue(cli, url, TREASURE, monkeypatch)
    refused = cli("rehearse", TREASURE, "--database", url)
    assert refused.code == 1 and "`rehearse --database URL --resume` carries them on" in refused.out

    result = cli("rehearse", "--database", url, "--resume", "--cues", "confirm")
    assert result.code == 0, result.out + result.err
    assert "carrying on 1 rehearsal run(s): run 1" in result.out
    assert "Watch for the finder) confirmed by rehearsal" in result.out
    assert "rehearsal completed: 1 of 1 runs completed" in result.out
    assert "First clue" not in result.out, "only what happens from now on is printed"
    assert [run.status for run in on_database(url, lambda e: views.list_runs(e))] == ["completed"]
    # The first rehearsal's virtual clock had run ten minutes ahead; carrying on from real time
    # would write the cue's confirmation before the cue was posted.
    moments = [entry.at for entry in on_database(url, lambda e: views.log_for_run(e, 1))]
    assert moments == sorted(moments), "the run's history goes back in time"
    assert cli("rehearse", TREASURE, "--database", url, "--cues", "confirm").code == 0


def test_defect_15_resume_carries_on_a_paused_run(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rehearsal that stopped at a pause (a failed step, or staff pressing pause) is carried on
    the way ``/event resume`` would: past the pause, to the end."""
    url = sqlite_url(tmp_path / "kept.sqlite3")
    _stop_at_a_cue(cli, url, TREASURE, monkeypatch)

    async def pause(engine: AsyncEngine) -> None:
        assert (await Controls(engine, clock=ManualClock(utcnow())).pause(1, actor=Actor(None, "gm"))).ok

    on_database(url, pause)
    # -v: the resume is a status transition, which the quiet transcript leaves out.
    result = cli("rehearse", "--database", url, "--resume", "--cues", "confirm", "-v")
    assert result.code == 0, result.out + result.err
    assert "run 1: paused → running (resume)" in result.out
    assert "rehearsal completed: 1 of 1 runs completed" in result.out


def test_defect_15_resume_takes_over_what_a_killed_rehearsal_left_mid_step(cli: Cli, tmp_path: Path) -> None:
    """A rehearsal killed while it dispatched a step leaves that step and its run leased to a
    process that is gone, at a virtual time hours ahead of the real one. Resume waits the leases
    out on the virtual clock, reclaims the step and sends it once."""
    url = sqlite_url(tmp_path / "kept.sqlite3")
    wait = {"action": "core.wait", "params": {"duration": "6h"}}
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(
            announce("announcements", "First"),
            wait,
            announce("announcements", "Second"),
            wait,
            announce("announcements", "Third"),
        ),
    )
    sleeps: list[float] = []

    async def killed_at_the_second_wait(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise _Killed

    options = RehearsalOptions(file=event, speed=60, database_url=url)
    with pytest.raises(_Killed):
        asyncio.run(rehearse(options, Config(), stream=io.StringIO(), sleep=killed_at_the_second_wait))

    async def lease_the_last_step(engine: AsyncEngine) -> None:
        # What a kill during the last step's dispatch leaves: both leases held, attempts spent.
        async with engine.begin() as conn:
            due = (
                await conn.execute(sa.select(steps.c.due_at).where(steps.c.run_id == 1, steps.c.seq == 4))
            ).scalar_one()
            held = due + dt.timedelta(seconds=75)
            await conn.execute(
                sa.update(steps)
                .where(steps.c.run_id == 1, steps.c.seq == 4)
                .values(
                    status="running",
                    attempts=1,
                    started_at=due,
                    claimed_by="rehearsal",
                    claim_expires_at=held,
                )
            )
            await conn.execute(
                sa.update(runs).where(runs.c.id == 1).values(claimed_by="rehearsal", claim_expires_at=held)
            )

    on_database(url, lease_the_last_step)
    result = cli("rehearse", "--database", url, "--resume")
    assert result.code == 0, result.out + result.err
    assert "run 1: step 5 (discord.announce) reclaimed" in result.out
    assert result.out.count("Third") == 1 and "Second" not in result.out
    assert "rehearsal completed: 1 of 1 runs completed" in result.out


class _Killed(Exception):
    """Stands in for the process dying during a wait."""


def test_defect_15_leftover_rehearsal_runs_are_cancelled_with_a_reason(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rehearse --database URL --cancel REASON`` cancels every rehearsal run in flight through
    ``Controls.cancel`` (logged with its reason and who did it); the database can be used again."""
    url = sqlite_url(tmp_path / "kept.sqlite3")
    _stop_at_a_cue(cli, url, INVASION, monkeypatch)
    result = cli("rehearse", "--database", url, "--cancel", "starting over")
    assert result.code == 0, result.err
    assert result.out.count(": cancelled") == 3
    summaries = on_database(url, lambda e: views.list_runs(e))
    assert {run.status for run in summaries} == {"cancelled"}
    assert {run.last_error for run in summaries} == {"cancelled by rehearse --cancel: starting over"}

    async def cancel_lines(engine: AsyncEngine) -> int:
        async with engine.connect() as conn:
            query = sa.select(sa.func.count()).where(run_log.c.actor_name == "rehearse --cancel")
            return int((await conn.execute(query)).scalar_one())

    assert on_database(url, cancel_lines) >= 3
    again = cli("rehearse", "--database", url, "--cancel", "again")
    assert again.code == 0 and "nothing to cancel" in again.out
    assert cli("rehearse", INVASION, "--database", url, "--cues", "confirm").code == 0


def test_defect_15_resume_refuses_a_database_with_a_live_run_and_cancel_leaves_it_alone(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Carrying on would tick every due run, so a live run in flight refuses --resume (changing
    nothing); --cancel only ever touches rehearsal runs."""
    url = sqlite_url(tmp_path / "shared.sqlite3")
    _stop_at_a_cue(cli, url, TREASURE, monkeypatch)

    async def start_live(engine: AsyncEngine) -> int:
        started = await Controls(engine, clock=ManualClock(utcnow())).start(
            "treasure-hunt", actor=Actor(None, "staff")
        )
        assert started.ok, started.message
        return started.run_ids[0]

    live = on_database(url, start_live)
    before = on_database(url, lambda e: views.list_runs(e))
    result = cli("rehearse", "--database", url, "--resume")
    assert result.code == 1
    assert "has 1 live run(s) in flight" in result.out
    assert on_database(url, lambda e: views.list_runs(e)) == before

    assert cli("rehearse", "--database", url, "--cancel", "tidy up").code == 0
    after = {run.id: run for run in on_database(url, lambda e: views.list_runs(e))}
    assert after[live].status == "scheduled" and not after[live].rehearsal
    assert all(run.status == "cancelled" for run in after.values() if run.rehearsal)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--resume"], "--resume needs --database URL"),
        (["--cancel", "x"], "--cancel needs --database URL"),
        (["FILE", "--database", "DB", "--resume"], "leave out FILE"),
        (["--database", "DB", "--resume", "--scope", "east"], "leave out --scope"),
        (["--database", "DB", "--cancel", "  "], "--cancel needs a reason"),
        ([], "name the event definition FILE to rehearse"),
    ],
)
def test_defect_15_resume_and_cancel_say_what_they_need(
    cli: Cli, tmp_path: Path, argv: list[str], says: str
) -> None:
    url = sqlite_url(tmp_path / "kept.sqlite3")
    args = [str(TREASURE) if a == "FILE" else url if a == "DB" else a for a in argv]
    result = cli("rehearse", *args)
    assert result.code == 2
    assert result.err.startswith("error: ") and says in result.err
    assert len(result.err.splitlines()) == 1, result.err
    assert not (tmp_path / "kept.sqlite3").exists()


def test_defect_15_rehearse_help_documents_resume_and_cancel(cli: Cli) -> None:
    result = cli("rehearse", "--help")
    assert result.code == 0
    for text in (
        "--resume",
        "--cancel REASON",
        "interrupted",
        "rehearse --database sqlite+aiosqlite:///r.sqlite3 --resume",
    ):
        assert text in result.out, text
