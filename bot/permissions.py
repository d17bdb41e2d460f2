"""Who may do what: capabilities tied to the staff roles named in config, checked server-side on
every interaction (``default_member_permissions`` only hides commands in the client; a member
can still send the interaction, and a server admin can change what the client shows).

The choice where the issue is silent: **only the roles in ``permissions`` grant anything.**
Neither Discord's Administrator permission nor owning the server is a bypass, so the config file
is the whole answer to "who can start, stop or confirm an event". A capability with no roles
configured is refused to everyone, with a reply that says which config key to set.

Capabilities (``wiring.config.CAPABILITIES``): ``start`` (/event start), ``control`` (pause,
resume, cancel, retry, skip), ``cue`` (Confirm / Skip on a GM cue), ``rehearse``
(/event rehearse), ``publish`` (/event validate, /event publish and its Publish / Cancel
buttons), ``signups`` (/event signups add, move, remove, close, reopen, and the buttons under
the staff's list), ``approve`` (Approve / Skip on a step whose action's risk waits for staff). Reading (status, list) needs any one of them; an option's autocomplete needs
the capability of the command it belongs to (a GM gets no choices for /event start).
``everyone`` (``/events``, what players see coming, and its buttons) needs no role: only the
server is checked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import discord

from runner.history import Actor
from wiring.config import CAPABILITIES, Config

log = logging.getLogger(__name__)

# What every member of the served guild may use (``/events``, ``/reminders``): no role needed.
EVERYONE = "everyone"

WHAT = {
    "start": "start events",
    "control": "pause, resume, cancel, retry or skip runs",
    "cue": "confirm or skip GM cues",
    "rehearse": "rehearse events",
    "publish": "validate or publish event definitions",
    "signups": "add, move or remove members or close sign-ups",
    "staff": "use the event commands",
    "attendance": "take attendance",
    "approve": "approve or skip risky steps",
}


def role_ids(user: discord.abc.User) -> set[int]:
    """The member's role ids, straight from the interaction payload (no member cache needed)."""
    if not isinstance(user, discord.Member):
        return set()
    return {role.id for role in user.roles}


def roles_for(config: Config, capability: str) -> set[int]:
    if capability == "staff":
        return set().union(*(config.roles_for(c) for c in CAPABILITIES))
    if capability == "attendance":
        # The GM at the cue, or staff who manage sign-ups afterwards.
        return config.roles_for("cue") | config.roles_for("signups")
    return config.roles_for(capability)


def member_may(config: Config, user: discord.abc.User, capability: str) -> bool:
    """True when the member holds one of the roles config grants ``capability`` (or, for
    ``staff``, any capability)."""
    return bool(role_ids(user) & roles_for(config, capability))


def wrong_guild(config: Config, guild_id: int | None) -> bool:
    """Interactions from DMs, or from any guild but the configured one, are refused."""
    if guild_id is None:
        return True
    return config.guild_id is not None and guild_id != config.guild_id


def refusal(config: Config, interaction: discord.Interaction, capability: str) -> str | None:
    """Why this interaction may not use ``capability``; ``None`` when it may."""
    if wrong_guild(config, interaction.guild_id):
        return "This bot only serves its own server; nothing was done."
    if capability == EVERYONE or member_may(config, interaction.user, capability):
        return None
    allowed = sorted(roles_for(config, capability))
    if not allowed:
        key = {"staff": "any of permissions.*", "attendance": "permissions.cue or permissions.signups"}.get(
            capability, f"permissions.{capability}"
        )
        return f"No role may {WHAT[capability]} yet (set {key} in the bot's config). Nothing was done."
    roles = ", ".join(f"<@&{r}>" for r in allowed)
    return f"You need one of these roles to {WHAT[capability]}: {roles}. Nothing was done."


async def admit(config: Config, interaction: discord.Interaction, capability: str) -> bool:
    """The check every slash command, autocomplete and button passes before it acts (the tree's
    ``interaction_check``, each ``DynamicItem``'s): ``True`` when this interaction may use
    ``capability``. Otherwise it is logged, refused, and ``False``: ephemerally with the reason
    (which names the roles that may), or an autocomplete with no choices (Discord allows no
    message there). Nothing a refused interaction asked for is done."""
    reason = refusal(config, interaction, capability)
    if reason is None:
        return True
    # Imported here: bot.errors needs bot.cogs.control._render, which names actors through this module.
    from bot.errors import send_ephemeral

    command = interaction.command
    data: Mapping[str, object] = interaction.data or {}
    what = command.qualified_name if command else data.get("custom_id", "an interaction")
    log.info(
        "refused %s to user %s in guild %s",
        what,
        interaction.user.id,
        interaction.guild_id,
        extra={"user_id": interaction.user.id, "guild_id": interaction.guild_id},
    )
    if interaction.type is discord.InteractionType.autocomplete:
        try:
            await interaction.response.autocomplete([])
        except discord.HTTPException as exc:
            log.debug("could not answer autocomplete %s: %s", interaction.id, exc)
    else:
        # The reason lists the roles that may: fitted like every other reply.
        await send_ephemeral(interaction, reason)
    return False


def actor_of(user: discord.abc.User) -> Actor:
    """Who pressed, as the controls take it and the run history keeps it: the member's id (a
    mention wherever Discord shows it) and the name they go by."""
    return Actor(id=str(user.id), name=user.display_name)
