"""The attendee role as Discord has it now (the gateway's cache of the server's roles, kept up to
date by role create/update/delete events): whether it is safe to hand out
(``wiring.attendee_role_rule``), and whether the bot can give or take it at all.

The grant loop asks before every request, so a role that is unsafe, deleted, above the bot's
own, or a bot without Manage Roles costs no request to Discord: refusals Discord would answer
(403, 404) count against its limit on invalid requests. Preflight and ``/event health`` ask the
same question, so what they accept is what the loop gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import discord

from bot.discord_messages import permission_name
from wiring.attendee_role_rule import live_refusal
from wiring.config import Config

# What stops the bot giving (or taking) a role: the kinds the staff are told about once each.
GONE = "gone"
UNSAFE = "unsafe"
UNMANAGEABLE = "unmanageable"


@dataclass(frozen=True)
class Blocked:
    kind: str
    text: str


def _alias_of(config: Config, role_id: int) -> str:
    return next((alias for alias, rid in config.roles.items() if rid == role_id), str(role_id))


def unsafe(config: Config, role: discord.Role) -> str | None:
    """Why ``role`` may never be an attendee role (None: safe)."""
    return live_refusal(
        _alias_of(config, role.id),
        role.id,
        role.permissions.value,
        config.roles,
        config.permissions,
        label=f"@{role.name}",
    )


def blocked(guild: discord.Guild, config: Config, role_id: int, *, giving: bool) -> Blocked | None:
    """What stops the bot giving (``giving``) or taking back ``role_id`` now; None: go ahead.
    Taking a role back is never refused for its permissions: taking away is safe."""
    role = guild.get_role(role_id)
    if role is None:
        return Blocked(GONE, f"attendee role {role_id} no longer exists in this server")
    if giving:
        refusal = unsafe(config, role)
        if refusal:
            return Blocked(UNSAFE, refusal)
    me = guild.me
    if me is None or not me.guild_permissions.manage_roles or role >= me.top_role or role.managed:
        return Blocked(
            UNMANAGEABLE,
            f"the bot cannot give or take attendee role @{role.name}: it needs Manage Roles and its "
            "own highest role above it (Server Settings → Roles)",
        )
    return None


def unsafe_problem(client: discord.Client, config: Config, alias: str) -> str | None:
    """Preflight's and ``/event health``'s check of the role's live permissions (the role's
    existence and position are ``DiscordDelivery.check_attendee_role``'s)."""
    role_id = config.roles.get(alias)
    guild = client.get_guild(config.guild_id) if config.guild_id is not None else None
    role = guild.get_role(role_id) if guild is not None and role_id is not None else None
    return unsafe(config, role) if role is not None else None


def attendee_role_problems(guild: discord.Guild | None, config: Config, alias: str) -> list[str]:
    """What granting ``alias`` to attendees would hit: Manage Roles, and a role below the bot's
    own highest (Discord refuses any other). Preflight asks before a start."""
    role_id = config.roles.get(alias)
    if role_id is None:
        return [f"attendee role {alias!r} is not one of the role aliases in config (roles)"]
    if guild is None or guild.me is None:
        return [f"cannot check attendee role {alias!r}: the bot is not connected to its server"]
    role = guild.get_role(role_id)
    if role is None:
        return [f"attendee role {alias!r} ({role_id}) does not exist in this server"]
    problems = []
    if not guild.me.guild_permissions.manage_roles:
        problems.append(
            f"the bot lacks {permission_name('manage_roles')}, so attendee role @{role.name} cannot be given"
        )
    if role >= guild.me.top_role or role.managed:
        problems.append(
            f"attendee role @{role.name} is not below the bot's highest role (@{guild.me.top_role.name}): "
            "move the bot's role above it in Server Settings → Roles"
        )
    return problems
