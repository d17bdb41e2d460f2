"""The one rule for what may be an ``attendee_role`` (``wiring.attendee_role_rule``): never a
role ``permissions`` names, by any alias, and never a role with a Discord permission beyond plain
membership; refused by validate/publish when the config says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import discord
import pytest

from actions import validation_registry
from tests.support.definitions import event, phase, wait
from wiring.attendee_role_rule import config_refusal, elevated_permissions, live_refusal
from wiring.config import load
from wiring.definition_checks import check_aliases, check_parsed

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "config.example.yaml"
ROLES = {"moderator": 1, "mods-too": 1, "gm": 2, "raiders": 3}
PERMISSIONS = {"control": ["moderator"], "cue": ["gm"]}


def test_defect_signup_role_escalation_a_capability_role_is_refused_by_validate_and_publish() -> None:
    config = load(EXAMPLE_CONFIG)
    spec = event(
        "raid",
        phase("main", wait("1m")),
        signup={"options": ["going"], "attendee_role": "staff", "channel": "announcements"},
    )
    checked = [check_parsed("raid.yaml", spec, validation_registry())]
    asyncio.run(check_aliases(checked, config))
    found = [str(p) for p in checked[0].problems]
    assert any(
        "'signup.attendee_role': role 'staff' is a bot staff role (permissions.approve, permissions.control, "
        "permissions.cue, permissions.publish, permissions.rehearse, permissions.signups, permissions.start)"
        in line
        for line in found
    ), found


def test_a_capability_role_is_refused_under_another_alias_for_the_same_id() -> None:
    refusal = config_refusal("mods-too", ROLES, PERMISSIONS)
    assert refusal is not None and "permissions.control" in refusal
    assert config_refusal("raiders", ROLES, PERMISSIONS) is None


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("administrator", "Administrator"),
        ("manage_roles", "Manage Roles"),
        ("manage_guild", "Manage Server"),
        ("manage_channels", "Manage Channels"),
        ("manage_messages", "Manage Messages"),
        ("kick_members", "Kick Members"),
        ("ban_members", "Ban Members"),
        ("moderate_members", "Timeout Members (Moderate Members)"),
        ("mention_everyone", "Mention @everyone, @here and All Roles"),
        ("manage_webhooks", "Manage Webhooks"),
        ("view_audit_log", "View Audit Log"),
    ],
)
def test_a_role_with_an_elevated_permission_is_refused_live(flag: str, name: str) -> None:
    bits = discord.Permissions(**{flag: True}).value
    refusal = live_refusal("raiders", 3, bits, ROLES, PERMISSIONS, label="@Raiders")
    assert refusal is not None and f"attendee role @Raiders carries {name}" in refusal


def test_discords_default_member_permissions_are_plain() -> None:
    """A role made in Discord's client starts with the default set: it must be accepted."""
    default = discord.Permissions(
        view_channel=True,
        send_messages=True,
        read_message_history=True,
        add_reactions=True,
        create_instant_invite=True,
        change_nickname=True,
        connect=True,
        speak=True,
        use_application_commands=True,
        create_public_threads=True,
        send_messages_in_threads=True,
    )
    assert live_refusal("raiders", 3, default.value, ROLES, PERMISSIONS) is None


def test_an_unknown_future_permission_bit_is_refused() -> None:
    assert elevated_permissions(1 << 60) == ["permission bit 60"]
