"""Crash: a process SIGKILLed in the middle of a leave's promotion (issue 20).

A leave frees a seat, promotes the first member waiting, and writes the notice row and the
run-log line, in one transaction. The child process is killed at each point between those
statements: nothing it did survives (the leaver is still seated, nobody promoted, no notice),
and the leave done again by another process promotes exactly once, with exactly one notice.
Killed after the commit instead, its promotion and its one notice are there, the leave is not
done twice, and the notice is delivered once by whoever claims it.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from bridge import signup_messages
from runner import signups
from runner.db import create_engine
from runner.schema import signup_notices, signup_pools
from runner.signups import Left, NotSignedUp
from runner.states import SignupStatus
from runner.views import log_for_run
from tests.signups.booking import T0, book, member

REPO = Path(__file__).resolve().parents[2]
# (the statement the child stops after, which one of them): every point of the leave's one
# transaction, from its first write to its last.
POINTS = [
    ("UPDATE event_signups SET status", 1),  # the leaver cancelled
    ("UPDATE event_signup_pools SET taken=(event_signup_pools.taken -", 2),  # both seats freed
    ("UPDATE event_signup_pools SET taken=(event_signup_pools.taken +", 2),  # the seats taken again
    ("UPDATE event_signups SET status", 2),  # the first waiting member confirmed
    ("INSERT INTO event_signup_notices", 1),  # the notice written
    ("INSERT INTO event_run_log", 1),  # the promotion logged
]
LEAVER, WAITING, NEXT = member(1), member(2), member(3)


async def seed(url: str) -> int:
    engine = create_engine(url)
    try:
        run_id = await book(engine, {"options": {"going": 1}})
        for member_id, name in (LEAVER, WAITING, NEXT):
            await signups.join(engine, run_id, member_id, name, "going", (), T0)
        return run_id
    finally:
        await engine.dispose()


async def leave_in_child(url: str, run_id: int, stop_after: str, nth: int, tmp_path: Path) -> None:
    """Start the child, wait until it stopped where told, SIGKILL it."""
    stderr = tmp_path / "child.stderr"
    with stderr.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.reliability.signup_child",
            *("--url", url, "--run-id", str(run_id), "--member-id", LEAVER[0], "--member-name", LEAVER[1]),
            *("--now", T0.isoformat(), "--stop-after", stop_after, "--nth", str(nth)),
            cwd=REPO,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
        )
    assert process.stdout is not None
    try:
        said = [await asyncio.wait_for(process.stdout.readline(), 30) for _ in range(2)]
        assert said == [b"ready\n", b"stopped\n"], (said, stderr.read_text()[-2000:])
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        await process.wait()
    assert process.returncode == -signal.SIGKILL


async def state(url: str, run_id: int) -> tuple[dict[str, str], list[sa.RowMapping], dict[str, int], int]:
    engine = create_engine(url)
    try:
        listed = await signups.listing(engine, run_id)
        assert listed is not None
        statuses = {
            s.member_name: s.status.value for o in listed.options for s in [*o.confirmed, *o.waitlisted]
        }
        async with engine.connect() as conn:
            notices = list((await conn.execute(sa.select(signup_notices))).mappings())
            taken = dict((await conn.execute(sa.select(signup_pools.c.pool, signup_pools.c.taken))).all())
        promoted = [e for e in await log_for_run(engine, run_id) if e.kind == "signup.promoted"]
        return statuses, notices, taken, len(promoted)
    finally:
        await engine.dispose()


@pytest.mark.parametrize(("stop_after", "nth"), POINTS, ids=[f"{p}#{n}" for p, n in POINTS])
async def test_a_leave_killed_before_its_commit_leaves_nothing_and_promotes_once_when_done_again(
    database_url: str, tmp_path: Path, stop_after: str, nth: int
) -> None:
    run_id = await seed(database_url)
    await leave_in_child(database_url, run_id, stop_after, nth, tmp_path)
    statuses, notices, taken, promoted = await state(database_url, run_id)
    assert statuses == {"member1": "confirmed", "member2": "waitlisted", "member3": "waitlisted"}
    assert (notices, taken, promoted) == ([], {"*": 1, "going": 1}, 0)

    engine = create_engine(database_url)
    try:
        answer = await signups.leave(engine, run_id, *LEAVER, T0)
        assert isinstance(answer, Left) and answer.promoted is not None
        assert answer.promoted.member_id == WAITING[0]
        assert await signups.leave(engine, run_id, *LEAVER, T0) == NotSignedUp()
    finally:
        await engine.dispose()
    statuses, notices, taken, promoted = await state(database_url, run_id)
    assert statuses == {"member2": "confirmed", "member3": "waitlisted"}
    assert [n["member_id"] for n in notices] == [WAITING[0]]
    assert (taken, promoted) == ({"*": 1, "going": 1}, 1)


async def test_a_process_killed_after_the_leave_committed_leaves_one_promotion_and_one_notice(
    database_url: str, tmp_path: Path
) -> None:
    run_id = await seed(database_url)
    await leave_in_child(database_url, run_id, "committed", 1, tmp_path)
    statuses, notices, _, promoted = await state(database_url, run_id)
    assert statuses == {"member2": SignupStatus.CONFIRMED.value, "member3": SignupStatus.WAITLISTED.value}
    assert ([n["member_id"] for n in notices], promoted) == ([WAITING[0]], 1)
    assert notices[0]["delivered_at"] is None
    engine = create_engine(database_url)
    try:
        # The member clicking Leave again (no answer reached them) changes nothing.
        assert await signups.leave(engine, run_id, *LEAVER, T0) == NotSignedUp()
        (claimed,) = await signup_messages.claim_notices(engine, "survivor", T0)
        assert claimed.member_id == WAITING[0]
        assert await signup_messages.settle_notice(engine, claimed, "survivor", T0, via="dm")
        assert await signup_messages.claim_notices(engine, "survivor", T0) == []
    finally:
        await engine.dispose()
