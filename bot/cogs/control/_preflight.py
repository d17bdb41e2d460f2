"""What ``/event start`` and ``/event rehearse`` check before anything starts.

``check_start`` runs preflight (every step's action called with ``verify: true``, for a live
run) or checks the sandbox channel (for a rehearsal, where every message goes) and pins the
version it checked. ``confirmed_scope`` is the other half, for "Start anyway": it refuses if the
event was republished since, so nobody starts a version nobody checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.cogs.signups._role_checks import unsafe_problem
from bot.discord_delivery import DiscordDelivery
from bot.errors import BotError
from runner import views
from runner.definitions import EventDefinition
from runner.errors import Problem
from runner.preflight import needing_approval, preflight, thread_targets
from wiring.config import Config
from wiring.services import Services

ALL_SCOPES = "*"


@dataclass(frozen=True)
class StartCheck:
    key: str
    title: str
    version_id: int
    # The scope as an index into the version's scopes ("*": every scope), short enough for a
    # button's custom id.
    scope_token: str
    problems: list[Problem]


async def check_start(
    services: Services[DiscordDelivery],
    config: Config,
    key: str,
    scope: str | None,
    *,
    rehearsal: bool,
) -> StartCheck:
    current = await views.current_definition(services.engine, key, services.versions)
    definition = current.definition
    scopes = definition.run_scopes()
    problems: list[Problem] = []
    if scope is not None and scope not in scopes:
        pass  # the start control refuses it, in its own words
    elif rehearsal:
        if config.sandbox_channel is None:
            raise BotError(
                "Rehearsals need a staff sandbox channel: set sandbox_channel in the bot's config."
            )
        found = await services.delivery.check_channel(config.sandbox_channel)
        problems = [Problem(message, field="sandbox_channel") for message in found]
        # A rehearsal's announcements, and so its threads, are in the sandbox; it gives no roles.
        problems += await thread_problems(services.delivery, definition, config.sandbox_channel)
    else:
        problems = await preflight(
            services.registry, definition, scope=scope if scope is not None else scopes[0]
        )
        problems += await thread_problems(services.delivery, definition)
        problems += attendee_role_problems(services.delivery, definition)
        problems += await approval_problems(services, config, definition)
    token = ALL_SCOPES if scope is None or scope not in scopes else str(scopes.index(scope))
    return StartCheck(key, definition.title, current.version_id, token, problems)


async def confirmed_scope(
    services: Services[DiscordDelivery], key: str, version_id: int, scope_token: str
) -> str | None:
    """The scope a "Start anyway" meant (``None``: every scope), if the version it checked is
    still the published one."""
    current = await views.current_definition(services.engine, key, services.versions)
    if current.version_id != version_id:
        raise BotError(
            f"{key} was republished after it was checked; run the command again to check the new version."
        )
    if scope_token == ALL_SCOPES:
        return None
    return current.definition.run_scopes()[int(scope_token)]


async def thread_problems(
    delivery: DiscordDelivery, definition: EventDefinition, channel: str | None = None
) -> list[Problem]:
    """Create Public Threads and Send Messages in Threads where each thread step's announcement
    goes (``channel``: where all of them go, a rehearsal's sandbox), once per channel."""
    targets, _ = thread_targets(definition)
    problems: list[Problem] = []
    checked: set[str] = set()
    for target in targets:
        where = channel or target.channel
        if where in checked:
            continue
        checked.add(where)
        problems.extend(
            Problem(message, phase=target.phase, step=target.step)
            for message in await delivery.check_thread_channel(where)
        )
    return problems


async def approval_problems(
    services: Services[DiscordDelivery], config: Config, definition: EventDefinition
) -> list[Problem]:
    """A step that will wait for an approval nobody may give, or whose card has nowhere to go."""
    waiting = needing_approval(services.registry, definition, config.approve_from)
    problems = []
    if waiting and not config.roles_for("approve"):
        problems += [
            Problem(
                f"{each.action} waits for a staff approval (approve_from: {config.approve_from}), and no role "
                "may approve (set permissions.approve in the bot's config)",
                phase=each.phase,
                step=each.step,
            )
            for each in waiting
        ]
    channel = config.approvals_channel
    if waiting and channel is None:
        problems.append(
            Problem(
                "no channel for approval cards: set approval_channel or staff_log_channel",
                field="approval_channel",
            )
        )
    elif waiting and channel is not None:
        found = await services.delivery.check_channel(channel)
        problems += [Problem(message, field="approval_channel") for message in found]
    return problems


def attendee_role_problems(delivery: DiscordDelivery, definition: EventDefinition) -> list[Problem]:
    """Manage Roles, the ``attendee_role`` below the bot's highest role, and safe to hand out
    (no bot capability, no permission beyond plain membership)."""
    signup = definition.signup
    if signup is None or signup.attendee_role is None:
        return []
    found = delivery.check_attendee_role(signup.attendee_role)
    unsafe = unsafe_problem(delivery.bot, delivery.config, signup.attendee_role)
    if unsafe:
        found.insert(0, unsafe)
    return [Problem(message, field="signup.attendee_role") for message in found]
