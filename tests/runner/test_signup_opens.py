"""``signup.opens`` in the definition and the runner (issue 28 item 3): the run is booked early
enough for its sign-ups to open, and the model refuses an ``opens`` that cannot work."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from runner.definitions import EventDefinition
from runner.schema import runs
from tests.support.definitions import event
from tests.support.world import T0, World, phase, step


def weekly(**signup: Any) -> dict[str, Any]:
    return event(
        "weekly",
        phase("main", step("test.go", {})),
        schedule={"cron": "0 20 * * *", "timezone": "UTC"},
        signup={"channel": "announcements", "options": ["going"], **signup},
    )


async def test_a_run_is_booked_before_its_signups_open(world: World) -> None:
    world.register(world.scripted.action("test.go"))
    await world.publish(weekly(opens="3d"))
    await world.tick(T0)
    async with world.engine.connect() as conn:
        starts = list((await conn.execute(sa.select(runs.c.scheduled_for))).scalars())
    assert max(starts) >= T0 + dt.timedelta(days=3), "the run opening in three days exists now"


@pytest.mark.parametrize(
    ("signup", "words"),
    [
        ({"opens": "1h", "closes": "2h"}, "opens must come before closes"),
        ({"opens": "1h", "channel": None}, "opens needs channel"),
        ({"opens": "40d"}, "at most 30 days"),
    ],
)
def test_an_opens_that_cannot_work_is_refused(signup: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        EventDefinition.model_validate(weekly(**signup))


def test_a_signup_without_opens_hashes_as_before() -> None:
    plain = EventDefinition.model_validate(weekly())
    assert '"opens"' not in plain.canonical_json()
