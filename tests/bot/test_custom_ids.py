"""Every custom id the bot makes is read back as what it was built from, by the same module, and
discord.py's ``DynamicItem`` templates are that module's; no id from elsewhere is taken for one."""

from __future__ import annotations

import re

import discord
import pytest

from bot import custom_ids
from bot.app import EventBot
from bot.cogs.approvals._cog import ApprovalButton
from bot.cogs.control._cog import StartAnyway
from bot.cogs.cues._cog import CueButton
from bot.cogs.players._cog import LeaveButton, PageButton
from bot.cogs.publishing._drafts import Drafts
from bot.cogs.publishing._flow import PublishButton
from bot.custom_ids import (
    ApprovalPress,
    CuePress,
    EventsLeave,
    EventsPage,
    PublishPress,
    StartAnywayPress,
    parse,
)

PRESSES = [
    CuePress(2, "confirm"),
    CuePress(10**12, "skip"),
    StartAnywayPress("raid", 7, custom_ids.ALL_SCOPES, "l"),
    StartAnywayPress("a" + "b" * 63, 123456789, "3", "r"),
    PublishPress("0123456789abcdef", "publish"),
    PublishPress("fedcba9876543210", "cancel"),
    EventsPage("u", 0),
    EventsPage("m", 9999),
    EventsLeave(10**18, 3),
    ApprovalPress(2, "approve"),
    ApprovalPress(2**63 - 1, "skip"),
]


@pytest.mark.parametrize("press", PRESSES, ids=lambda p: p.custom_id)
def test_each_custom_id_is_read_back_as_what_built_it(press: custom_ids.Press) -> None:
    assert len(press.custom_id) <= 100, "Discord's limit"
    assert parse(press.custom_id) == press


@pytest.mark.parametrize(
    "custom_id",
    [
        None,
        "",
        "cue:2:maybe",
        "cue:x:confirm",
        "evstart:Raid:1:*:l",
        "evpub:0123:publish",
        "cue:2:confirm:x",
        "evpage:x:1",
        "evleave:1",
        "evappr:2:confirm",
    ],
)
def test_an_id_the_bot_did_not_make_is_none_of_its_presses(custom_id: str | None) -> None:
    assert parse(custom_id) is None


def test_the_buttons_match_presses_with_the_templates_of_custom_ids() -> None:
    for item, kind in (
        (CueButton, CuePress),
        (StartAnyway, StartAnywayPress),
        (PublishButton, PublishPress),
        (PageButton, EventsPage),
        (LeaveButton, EventsLeave),
        (ApprovalButton, ApprovalPress),
    ):
        template: re.Pattern[str] = item.__discord_ui_compiled_template__
        assert template.pattern == kind.TEMPLATE, item.__name__


def test_a_preview_press_is_elsewhere_only_when_another_process_holds_its_draft() -> None:
    drafts = Drafts()
    press = PublishPress("0123456789abcdef", "publish")
    assert drafts.elsewhere({"custom_id": press.custom_id})
    assert not drafts.elsewhere({"custom_id": CuePress(2, "confirm").custom_id})
    assert not drafts.elsewhere(None)


def test_defect_claims_replaced_discord_py_connection_state() -> None:
    """Before: interactions were claimed in a ``ConnectionState`` subclass that ``EventBot``
    swapped in by overriding ``Client._get_state``, a private factory, which held discord.py
    below 2.8. Now the claim is asked by the documented hooks (the tree's and each button's
    ``interaction_check``, ``on_interaction``), and the bot leaves discord.py's internals alone."""
    assert "_get_state" not in vars(EventBot)
    assert EventBot._get_state is discord.Client._get_state
    assert "on_interaction" in vars(EventBot)
