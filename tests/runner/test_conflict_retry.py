"""``retry_on_conflict`` (tenacity's loop since issue 27): the same semantics as the loop it
replaced. Only a lost lock conflict is retried, at most ``CONFLICT_ATTEMPTS`` times in all, with
the one backoff's waits; the last conflict is raised as itself, and the process's counts say
how many were retried and given up on."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from runner import backoff, db
from runner.db import CONFLICT_ATTEMPTS, CONFLICTS, retry_on_conflict


def _deadlock() -> sa.exc.OperationalError:
    return sa.exc.OperationalError(
        "COMMIT", {}, Exception(1213, "Deadlock found; try restarting transaction")
    )


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, dict[str, Any]]]:
    asked: list[tuple[int, dict[str, Any]]] = []
    real = backoff.delay

    def recording(attempt: int, **kwargs: Any) -> float:
        asked.append((attempt, kwargs))
        return real(attempt, **kwargs) / 1000

    monkeypatch.setattr(backoff, "delay", recording)
    return asked


async def test_a_lost_conflict_runs_the_transaction_again_with_the_one_backoff(
    waits: list[tuple[int, dict[str, Any]]],
) -> None:
    calls = 0

    @retry_on_conflict
    async def transaction(value: int) -> int:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise _deadlock()
        return value

    retried = CONFLICTS.retried
    assert await transaction(7) == 7
    assert calls == 3
    assert CONFLICTS.retried == retried + 2
    expected = {
        "first": db.CONFLICT_BACKOFF_FIRST,
        "cap": db.CONFLICT_BACKOFF_CAP,
        "jitter": db.CONFLICT_BACKOFF_JITTER,
    }
    assert waits == [(0, expected), (1, expected)]


async def test_a_conflict_that_keeps_coming_is_raised_as_itself_after_the_last_attempt(
    waits: list[tuple[int, dict[str, Any]]],
) -> None:
    calls = 0

    @retry_on_conflict
    async def transaction() -> None:
        nonlocal calls
        calls += 1
        raise _deadlock()

    retried, gave_up = CONFLICTS.retried, CONFLICTS.gave_up
    with pytest.raises(sa.exc.OperationalError, match="Deadlock found"):
        await transaction()
    assert calls == CONFLICT_ATTEMPTS
    assert CONFLICTS.retried == retried + CONFLICT_ATTEMPTS - 1
    assert CONFLICTS.gave_up == gave_up + 1


async def test_any_other_error_is_raised_at_once_and_never_retried(
    waits: list[tuple[int, dict[str, Any]]],
) -> None:
    calls = 0

    @retry_on_conflict
    async def transaction() -> None:
        nonlocal calls
        calls += 1
        raise sa.exc.OperationalError("SELECT 1", {}, Exception(2013, "Lost connection"))

    retried, gave_up = CONFLICTS.retried, CONFLICTS.gave_up
    with pytest.raises(sa.exc.OperationalError, match="Lost connection"):
        await transaction()
    assert calls == 1
    assert waits == []
    assert (CONFLICTS.retried, CONFLICTS.gave_up) == (retried, gave_up)
