"""The verbs a step can name. ``build_registry`` wires them to a delivery: the bot passes the
Discord one, the rehearsal a console one, tests a recording one."""

from __future__ import annotations

from actions.core import wait_action
from actions.delivery import Delivery
from actions.messaging import Describe, announce_action, cue_action
from runner.registry import ActionRegistry


def build_registry(delivery: Delivery, describe: Describe) -> ActionRegistry:
    registry = ActionRegistry()
    registry.register("core", [wait_action()])
    registry.register("messaging", [announce_action(delivery, describe), cue_action(delivery, describe)])
    return registry


async def _no_context(run_id: int, step_id: int) -> None:
    return None


def validation_registry() -> ActionRegistry:
    """A registry good for validating definitions only (its actions deliver nowhere)."""
    from actions.delivery import RecordingDelivery

    return build_registry(RecordingDelivery(), _no_context)
