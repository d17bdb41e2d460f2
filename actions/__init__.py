"""The verbs a step can name. ``build_registry`` wires them to a delivery: the bot passes the
Discord one, the rehearsal a console one, tests a recording one. The actions of installed plugins
(``actions.plugins``) are staged with the built-in ones, so everything that builds a registry
(the bot, a rehearsal, ``validate``, ``/event publish``) knows them."""

from __future__ import annotations

from collections.abc import Mapping

from actions.attendee_dms import attendee_dms_action
from actions.core import wait_action
from actions.delivery import Delivery
from actions.messaging import Describe, announce_action, cue_action
from actions.plugins import stage_plugins
from actions.rcon import rcon_action
from actions.signup import NoSignups, SignupStore, signup_action
from actions.threads import RecordingThreads, ThreadStore, thread_action
from actions.webhook import webhook_action
from runner.registry import ActionRegistry
from wiring.game_targets import RconServer, WebhookTarget


def build_registry(
    delivery: Delivery,
    describe: Describe,
    threads: ThreadStore | None = None,
    signups: SignupStore | None = None,
    webhooks: Mapping[str, WebhookTarget] | None = None,
    rcon: Mapping[str, RconServer] | None = None,
    secrets: Mapping[str, str] | None = None,
) -> ActionRegistry:
    """``threads``: where a run's threads are recorded (the database's ``bridge.threads.RunThreads``
    for a runner; in memory for checking definitions, which runs nothing). ``signups``: where a
    run's sign-up list is read (``runner.signups.RunSignups`` for a runner; none for checking).
    ``secrets``: where the game targets' secrets are read (the process's environment when None)."""
    registry = ActionRegistry()
    registry.register("core", [wait_action()])
    registry.register("messaging", [announce_action(delivery, describe), cue_action(delivery, describe)])
    registry.register("threads", [thread_action(delivery, describe, threads or RecordingThreads())])
    registry.register("signups", [signup_action(delivery, describe, signups or NoSignups())])
    registry.register("reminders", [attendee_dms_action(delivery, describe)])
    # ``webhooks``: the config's targets by alias (none: a step naming one fails at preflight).
    rehearsed = getattr(delivery, "would_send", None)
    registry.register(
        "webhook", [webhook_action(webhooks or {}, describe, environ=secrets, rehearsed=rehearsed)]
    )
    # ``rcon``: the config's game servers by alias (none: a step naming one fails at preflight).
    registry.register("rcon", [rcon_action(rcon or {}, describe, environ=secrets, rehearsed=rehearsed)])
    # Last: a plugin may not take an id a built-in has. One refused is in ``registry.refused``.
    stage_plugins(registry, delivery, describe)
    return registry


async def _no_context(run_id: int, step_id: int) -> None:
    return None


def validation_registry() -> ActionRegistry:
    """A registry good for validating definitions only (its actions deliver nowhere)."""
    from actions.delivery import RecordingDelivery

    return build_registry(RecordingDelivery(), _no_context)


def plugin_problems(registry: ActionRegistry | None = None) -> list[str]:
    """Why each refused plugin registered nothing, a short line per problem: those ``registry``
    met when it was built (the bot's own), or a fresh check's when none is given."""
    return list((registry or validation_registry()).refused)
