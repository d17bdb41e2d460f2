"""Approve and Skip on an approval card: who may press them, and what a press does.

A step whose action's risk waits for staff (``runner.approvals``) is parked on a card the
Discord delivery posts (``bot.cogs.approvals._render``). A press is dispatched by its custom id
(``bot.custom_ids.ApprovalPress``) to ``ApprovalButton``, registered by this extension's
``setup``, so it works after a restart and in whichever process Discord hands it to.

``ApprovalButton.interaction_check`` acts only on a press this process claimed, and refuses a
member without the ``approve`` capability as every command is refused (``bot.components``):
ephemerally, and nothing changes. Approve puts the step back to run at once (the control wakes
the runner); Skip skips it. Either way the card is edited: buttons off, "Approved by @name
<t:…:R>". A press that lost (a second Approve, a step whose run ended) is told why, ephemerally,
and the card is brought up to date.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import discord
from discord.ext import commands

from bot.cogs.approvals._render import NO_MENTIONS, VERBS, answered_text, approval_view
from bot.components import claimed_and_admitted
from bot.custom_ids import ApprovalPress, ApprovalVerb
from bot.errors import reply_to_error
from bot.permissions import actor_of
from bot.protocols import Served, served
from bot.rendering import control_answer, person
from runner import approvals
from runner.controls import ControlResult, Reason
from runner.states import Control, StepStatus

log = logging.getLogger(__name__)


class ApprovalButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=ApprovalPress.TEMPLATE
):
    """Approve or Skip on an approval card, rebuilt from its custom id whenever one is pressed."""

    def __init__(self, step_id: int, verb: ApprovalVerb) -> None:
        label, style = VERBS[verb]
        press = ApprovalPress(step_id, verb)
        super().__init__(discord.ui.Button(label=label, style=style, custom_id=press.custom_id))
        self.step_id = step_id
        self.verb = verb

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ApprovalButton:
        press = ApprovalPress.from_match(match)
        return cls(press.step_id, press.verb)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, "approve")

    async def callback(self, interaction: discord.Interaction) -> None:
        # discord.py only logs what a DynamicItem callback raises: the boundary is invoked here.
        try:
            await click(served(interaction), interaction, self.step_id, self.verb)
        except Exception as exc:
            await reply_to_error(interaction, exc)


async def click(bot: Served, interaction: discord.Interaction, step_id: int, verb: ApprovalVerb) -> None:
    """A press ``ApprovalButton.interaction_check`` let through: approve or skip, and say so."""
    await interaction.response.defer()
    controls = bot.services.controls
    actor = actor_of(interaction.user)
    # The control acts only on the step parked on this very card (a copied button naming a cue
    # or a pending step is refused).
    message_id = str(interaction.message.id) if interaction.message is not None else None
    if verb == Control.APPROVE:
        result = await controls.approve(step_id, actor=actor, message_id=message_id)
    else:
        result = await approvals.skip(controls, step_id, actor, message_id)
    if result.ok:
        status = StepStatus.PENDING if verb == Control.APPROVE else StepStatus.SKIPPED
        log.info(
            "approval %s: %s by %s", step_id, verb, actor, extra={"run_id": result.run_id, "step_id": step_id}
        )
        text = answered_text(status, interaction.user.mention, at=bot.services.clock.now())
        if not await _show(interaction, step_id, text):
            await interaction.followup.send(
                f"{'Approved' if verb == Control.APPROVE else 'Skipped'}, but Discord did not let me "
                "update the message.",
                ephemeral=True,
            )
        return
    await interaction.followup.send(control_answer(result), ephemeral=True)
    now_shown = current_text(result)
    if now_shown is not None:
        await _show(interaction, step_id, now_shown)


async def _show(interaction: discord.Interaction, step_id: int, text: str) -> bool:
    """Put ``text`` on the card and turn its buttons off. A refusal from Discord is logged, not
    raised: the step is answered either way."""
    try:
        await interaction.edit_original_response(
            content=text, view=approval_view(step_id, disabled=True), allowed_mentions=NO_MENTIONS
        )
    except discord.HTTPException as exc:
        log.warning("approval %s: could not edit its card: %s", step_id, exc, extra={"step_id": step_id})
        return False
    return True


def current_text(result: ControlResult) -> str | None:
    """What the card should say after a refused press: who approved it already, or how the step
    was settled; ``None`` when it still waits."""
    if result.reason is Reason.ALREADY_APPROVED:
        return answered_text(StepStatus.PENDING, person(result.by) if result.by else None)
    ref = result.cues[0] if result.cues else None
    if ref is None or ref.status is None or ref.status in (StepStatus.PENDING, StepStatus.RUNNING):
        return None
    who = person(ref.settled_by) if ref.settled_by else None
    return answered_text(ref.status, who, reason=ref.why)


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook``: a press on any approval card reaches ``ApprovalButton``."""
    bot.add_dynamic_items(ApprovalButton)
