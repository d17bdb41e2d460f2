"""An action's ``version`` is real: every step records the version of the action that performed
it (the seeds' ``action_version`` column), on both backends."""

from __future__ import annotations

import dataclasses

from tests.support.world import T0, World, phase, step


async def test_a_step_records_the_version_of_the_action_that_performed_it(world: World) -> None:
    """Before: ``version`` was validated at registration and never read, and every step said
    ``action_version = 1`` whatever performed it. Now the claim writes the registered version; a
    step whose action nobody registered keeps the default, and fails as before."""
    world.register(dataclasses.replace(world.scripted.action("test.versioned"), version=3))
    run_id = await world.seed_run([phase("main", step("test.versioned"), step("test.gone"))])
    await world.tick(T0)
    versioned, gone = await world.steps_of(run_id)
    assert (versioned["status"], versioned["action_version"]) == ("done", 3)
    assert (gone["status"], gone["action_version"]) == ("failed", 1)
