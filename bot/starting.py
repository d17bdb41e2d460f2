"""What ``/event start`` and ``/event rehearse`` check before anything starts.

``check_start`` runs preflight (every step's action called with ``verify: true``, for a live
run) or checks the sandbox channel (for a rehearsal, where every message goes) and pins the
version it checked. ``confirmed_scope`` is the other half, for "Start anyway": it refuses if the
event was republished since, so nobody starts a version nobody checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.discord_delivery import DiscordDelivery
from bot.errors import BotError
from runner import views
from runner.errors import Problem
from runner.preflight import preflight
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
    else:
        problems = await preflight(
            services.registry, definition, scope=scope if scope is not None else scopes[0]
        )
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
