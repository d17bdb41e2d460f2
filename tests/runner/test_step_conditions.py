"""A cue's answer decides what follows (issue 28 item 7): ``when: {cue: <label>, is: confirmed |
skipped}`` on a step. On SQLite and MariaDB (the ``world`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from actions import validation_registry
from runner import definitions
from runner.errors import DefinitionError
from runner.history import Actor
from runner.registry import Envelope
from tests.support.actions import build_action
from tests.support.definitions import event
from tests.support.world import World, phase, step

GM = Actor("7", "Gwen")
CUE = "Bring out the Warlord"


async def parks(envelope: Envelope, params: Any) -> dict[str, Any]:
    return {"ok": True, "await": "human"}


def invasion() -> list[dict[str, Any]]:
    appeared = step("test.say", {"text": "The Warlord has appeared!"}, label="Warlord appears")
    appeared["when"] = {"cue": CUE, "is": "confirmed"}
    retreat = step("test.say", {"text": "The Legion retreats."}, label="Legion retreats")
    retreat["when"] = {"cue": CUE, "is": "skipped"}
    return [
        phase("battle", step("gm.cue", label=CUE), appeared),
        phase("closing", retreat, step("test.say", {"text": "Thank you, defenders!"}, label="Thanks")),
    ]


async def played(world: World, answer: str) -> tuple[list[str], dict[str, str], int]:
    said: list[str] = []

    async def say(envelope: Envelope, params: Any) -> dict[str, Any]:
        said.append(envelope.params["text"])
        return {"ok": True}

    world.register(build_action("gm.cue", parks), owner="gm")
    world.register(build_action("test.say", say))
    run_id = await world.seed_run(invasion())
    await world.tick()
    [cue] = [s for s in await world.steps_of(run_id) if s["label"] == CUE]
    control = world.controls.confirm if answer == "confirm" else world.controls.skip
    assert (await control(int(cue["id"]), actor=GM)).ok
    for _ in range(4):
        await world.tick()
    assert (await world.run(run_id))["status"] == "completed"
    return said, {s["label"]: s["status"] for s in await world.steps_of(run_id)}, run_id


async def test_defect_skip_if_too_few_players_led_to_the_warlord_has_appeared(world: World) -> None:
    """Before: a GM's Skip on "Bring out the Warlord" was followed by "The Warlord has appeared!"
    all the same. Now that announcement runs only when the cue was confirmed."""
    said, statuses, _ = await played(world, "skip")
    assert "The Warlord has appeared!" not in said
    assert said == ["The Legion retreats.", "Thank you, defenders!"]
    assert statuses["Warlord appears"] == "skipped", "recorded skipped, never silently missing"


async def test_a_confirmed_cue_runs_the_steps_waiting_for_confirmed_and_skips_the_others(
    world: World,
) -> None:
    said, statuses, _ = await played(world, "confirm")
    assert said == ["The Warlord has appeared!", "Thank you, defenders!"]
    assert statuses["Legion retreats"] == "skipped"
    assert statuses["Thanks"] == "done"


async def test_a_skip_by_condition_says_why_in_the_run_log(world: World) -> None:
    *_, run_id = await played(world, "skip")
    notes = [str(e["detail"]) for e in await world.log(run_id) if e["kind"] == "step.skipped"]
    assert any(
        "runs only when cue 'Bring out the Warlord' is confirmed; it was skipped" in (n or "") for n in notes
    )


def spec_with(when: dict[str, Any], *, before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    announce = step("discord.announce", {"channel": "announcements", "content": "hi"}, label="Say")
    announce["when"] = when
    steps = [*(before or []), announce]
    return event("conditional", phase("main", *steps))


CUE_STEP = step("gm.cue", {"title": "Spawn", "instructions": "Spawn it"}, label="Spawn")


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (
            spec_with({"cue": "Spawn", "is": "confirmed"}),
            "names no cue 'Spawn' (the cues before this step: none)",
        ),
        (
            spec_with(
                {"cue": "Greet", "is": "confirmed"},
                before=[
                    step("discord.announce", {"channel": "announcements", "content": "hi"}, label="Greet")
                ],
            ),
            "names step 'Greet', a discord.announce step, not a gm.cue",
        ),
        (
            spec_with({"cue": "Spawn", "is": "answered"}, before=[CUE_STEP]),
            "'answered' is not one of confirmed, skipped",
        ),
    ],
)
def test_validate_refuses_a_when_naming_no_earlier_cue(raw: dict[str, Any], said: str) -> None:
    with pytest.raises(DefinitionError) as refused:
        definitions.validate(raw, validation_registry())
    assert any(said in str(p) for p in refused.value.problems), refused.value.problems


def test_a_when_naming_an_earlier_cue_is_valid_and_a_step_without_one_hashes_as_before() -> None:
    valid = definitions.validate(
        spec_with({"cue": "Spawn", "is": "skipped"}, before=[CUE_STEP]), validation_registry()
    )
    assert valid.phases[0].steps[1].when is not None
    plain = event(
        "plain", phase("main", step("discord.announce", {"channel": "announcements", "content": "hi"}))
    )
    assert '"when"' not in definitions.validate(plain, validation_registry()).canonical_json()
