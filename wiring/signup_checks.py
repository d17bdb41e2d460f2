"""The sign-up's aliases (``signup.roles``, ``signup.attendee_role``, ``signup.channel``) against
the config's roles and channels: the check ``check_aliases`` makes beside the steps' channels and ping roles, so a
definition naming a role the server's config lacks fails ``validate`` and ``publish`` alike. An
``attendee_role`` that is one of the bot's staff roles (``permissions``) is refused there too
(``wiring.attendee_role_rule``): everyone who signs up would get it."""

from __future__ import annotations

from runner.definitions import EventDefinition
from runner.errors import Problem
from runner.suggestions import did_you_mean
from wiring.attendee_role_rule import config_refusal
from wiring.config import Config


def signup_role_problems(definition: EventDefinition, config: Config, file: str | None) -> list[Problem]:
    signup = definition.signup
    if signup is None:
        return []
    known = ", ".join(sorted(config.roles)) or "none"
    named = [(f"signup.roles.{index}", alias) for index, alias in enumerate(signup.roles or ())]
    if signup.attendee_role:
        named.append(("signup.attendee_role", signup.attendee_role))
    problems = [
        Problem(
            f"role {alias!r} is not one of the role aliases in config (roles: {known})"
            f"{did_you_mean(alias, config.roles)}",
            file=file,
            field=field,
        )
        for field, alias in named
        if alias not in config.roles
    ]
    if signup.attendee_role:
        unsafe = config_refusal(signup.attendee_role, config.roles, config.permissions)
        if unsafe:
            problems.append(Problem(unsafe, file=file, field="signup.attendee_role"))
    channel = (signup.channel or "").removeprefix("#")
    if channel and not channel.isdigit() and channel not in config.channels:
        channels = ", ".join(sorted(config.channels)) or "none"
        problems.append(
            Problem(
                f"channel {channel!r} is not one of the channel aliases in config (channels: {channels})"
                f"{did_you_mean(channel, config.channels)}",
                file=file,
                field="signup.channel",
            )
        )
    return problems
