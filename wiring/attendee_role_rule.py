"""Whether a role is safe to hand out as an event's ``attendee_role``: the one rule that
validate/publish (config), preflight and ``/event health`` (the live role) and the grant itself
apply, so they can never disagree.

Anyone who clicks a sign-up button gets the attendee role, so it must give nothing but plain
membership. Two things make a role unsafe:

* **It is a bot capability role.** ``permissions`` names it (any capability), or another alias
  there points at the same role id: whoever holds it may start, cancel, confirm or publish.
* **It carries a Discord permission beyond plain membership.** Only the bits a member of any
  server may ordinarily have are allowed (``PLAIN``); every other bit is refused, including
  ones Discord adds later, so a new elevated permission fails closed. The price is that a new
  harmless bit is refused too until it is listed here; the refusal names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# The bits of plain membership: what Discord's default @everyone and new roles carry, and the
# like (talking, reacting, threads, voice, using apps). Everything else (Administrator, every
# Manage *, Kick, Ban, Moderate Members, Mention @everyone, Mute/Deafen/Move Members, View Audit
# Log, Priority Speaker, Pin Messages, Bypass Slowmode, ...) is refused.
PLAIN: Mapping[int, str] = {
    0: "Create Invite",
    6: "Add Reactions",
    9: "Video",
    10: "View Channels",
    11: "Send Messages",
    12: "Send Text-to-Speech Messages",
    14: "Embed Links",
    15: "Attach Files",
    16: "Read Message History",
    18: "Use External Emoji",
    20: "Connect",
    21: "Speak",
    25: "Use Voice Activity",
    26: "Change Nickname",
    31: "Use Application Commands",
    32: "Request to Speak",
    35: "Create Public Threads",
    36: "Create Private Threads",
    37: "Use External Stickers",
    38: "Send Messages in Threads",
    39: "Use Activities",
    42: "Use Soundboard",
    43: "Create Expressions",
    44: "Create Events",
    45: "Use External Sounds",
    46: "Send Voice Messages",
    49: "Create Polls",
    50: "Use External Apps",
}
PLAIN_MASK = sum(1 << bit for bit in PLAIN)

# How the refused bits are named (any bit not here is named by its number).
ELEVATED: Mapping[int, str] = {
    1: "Kick Members",
    2: "Ban Members",
    3: "Administrator",
    4: "Manage Channels",
    5: "Manage Server",
    7: "View Audit Log",
    8: "Priority Speaker",
    13: "Manage Messages",
    17: "Mention @everyone, @here and All Roles",
    19: "View Server Insights",
    22: "Mute Members",
    23: "Deafen Members",
    24: "Move Members",
    27: "Manage Nicknames",
    28: "Manage Roles",
    29: "Manage Webhooks",
    30: "Manage Expressions",
    33: "Manage Events",
    34: "Manage Threads",
    40: "Timeout Members (Moderate Members)",
    41: "View Server Subscription Insights",
    48: "Set Voice Channel Status",
    51: "Pin Messages",
    52: "Bypass Slowmode",
}


def elevated_permissions(permissions: int) -> list[str]:
    """The names of the bits in ``permissions`` beyond plain membership (empty: safe)."""
    extra = permissions & ~PLAIN_MASK
    return [
        ELEVATED.get(bit, f"permission bit {bit}") for bit in range(extra.bit_length()) if extra >> bit & 1
    ]


def capabilities_of(
    role_id: int, roles: Mapping[str, int], permissions: Mapping[str, Sequence[str]]
) -> list[str]:
    """The capabilities (``permissions.<capability>``) whose roles include ``role_id``, by any alias."""
    return sorted(
        capability
        for capability, aliases in permissions.items()
        if any(roles.get(alias) == role_id for alias in aliases)
    )


def config_refusal(
    alias: str, roles: Mapping[str, int], permissions: Mapping[str, Sequence[str]]
) -> str | None:
    """Why the config alone says ``alias`` may not be an attendee role (None: it may, as far as
    the config can tell; its Discord permissions are checked against the live role)."""
    role_id = roles.get(alias)
    if role_id is None:
        return None
    named = capabilities_of(role_id, roles, permissions)
    if not named:
        return None
    where = ", ".join(f"permissions.{c}" for c in named)
    return (
        f"role {alias!r} is a bot staff role ({where}): everyone who signs up would get it, "
        "so it can never be an attendee role; use a role of its own"
    )


def live_refusal(
    alias: str,
    role_id: int,
    role_permissions: int,
    roles: Mapping[str, int],
    permissions: Mapping[str, Sequence[str]],
    label: str | None = None,
) -> str | None:
    """Why the role as Discord has it now may not be handed out (None: safe). ``label`` is how
    to name it (``@Name``); the alias by default."""
    named = capabilities_of(role_id, roles, permissions)
    if named:
        return config_refusal(alias, roles, permissions) or (
            f"role {label or alias} is a bot staff role ({', '.join(f'permissions.{c}' for c in named)}): "
            "it can never be an attendee role"
        )
    extra = elevated_permissions(role_permissions)
    if extra:
        return (
            f"attendee role {label or repr(alias)} carries {', '.join(extra)}: everyone who signs up "
            "would get it, so it is not given; take those permissions off the role (Server Settings → Roles)"
        )
    return None
