"""GM cue buttons in Discord: who may press them, and what a press does.

The message itself (embed, buttons, the line a settled cue shows) is drawn in
``bot.cogs.cues._render``, which the Discord delivery posts. A press is dispatched by its custom id
(``bot.custom_ids.CuePress``) to ``CueButton``, which this extension's ``setup`` registers: a
press works after a restart, and in whichever bot process Discord hands it to, because the
step's state lives in the database and nowhere else.

``CueButton.interaction_check`` acts only on a press this process claimed, and refuses a member
without the ``cue`` capability the way every command is refused (``bot.components``): an
ephemeral reply, and nothing changes. A GM's
press confirms or skips the parked step through the engine's controls (which wake the runner, so
the next step goes out at once) and edits the message: buttons disabled, "Confirmed by @name
<t:…:R>". A press that lost (a second press, a cue of a cancelled run) is told what happened,
ephemerally, and the message is brought up to date.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import discord
from discord.ext import commands

from bot.cogs.cues._render import NO_MENTIONS, cue_button, cue_view, settled_text
from bot.components import claimed_and_admitted
from bot.custom_ids import CuePress, CueVerb
from bot.errors import reply_to_error
from bot.permissions import actor_of
from bot.protocols import Served, served
from bot.rendering import control_answer, person
from runner.controls import ControlResult
from runner.states import STEP_OPEN, Control, StepStatus

log = logging.getLogger(__name__)


class CueButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=CuePress.TEMPLATE):
    """Confirm or Skip on a posted cue, rebuilt from its custom id whenever one is pressed."""

    def __init__(self, step_id: int, verb: CueVerb) -> None:
        super().__init__(cue_button(step_id, verb))
        self.step_id = step_id
        self.verb = verb

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> CueButton:
        press = CuePress.from_match(match)
        return cls(press.step_id, press.verb)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, "cue")

    async def callback(self, interaction: discord.Interaction) -> None:
        # discord.py only logs what a DynamicItem callback raises (no View.on_error is called),
        # so the boundary is invoked here.
        try:
            await click(served(interaction), interaction, self.step_id, self.verb)
        except Exception as exc:
            await reply_to_error(interaction, exc)


async def click(bot: Served, interaction: discord.Interaction, step_id: int, verb: str) -> None:
    """A press ``CueButton.interaction_check`` let through: settle the cue, and say so."""
    # Answer within Discord's three seconds whatever the database does: a deferred update
    # (nothing visible), then the message is edited when the engine has answered.
    await interaction.response.defer()
    controls = bot.services.controls
    actor = actor_of(interaction.user)
    # The step id and verb come from the custom id, which only Discord's own check ties to this
    # message: the control acts only on the GM cue posted as this very message (a Skip naming a
    # pending announcement, or a copied button naming another cue, is refused). The guild was
    # checked by ``CueButton.interaction_check``.
    message_id = str(interaction.message.id) if interaction.message is not None else None
    result = await controls.settle_cue(step_id, verb, actor=actor, message_id=message_id)
    ids = {"run_id": result.run_id, "step_id": step_id}
    if result.ok:
        status = StepStatus.DONE if verb == Control.CONFIRM else StepStatus.SKIPPED
        log.info("cue %s %s by %s", step_id, status, actor, extra=ids)
        text = settled_text(status, interaction.user.mention, at=bot.services.clock.now())
        if not await _show(interaction, step_id, text):
            word = "Confirmed" if verb == Control.CONFIRM else "Skipped"
            await interaction.followup.send(
                f"{word}, but Discord did not let me update the message.", ephemeral=True
            )
        return
    await interaction.followup.send(control_answer(result), ephemeral=True)
    now_shown = current_text(result)
    if now_shown is not None:
        await _show(interaction, step_id, now_shown)


async def _show(interaction: discord.Interaction, step_id: int, text: str) -> bool:
    """Put ``text`` on the clicked cue message and disable its buttons. A refusal from Discord
    is logged, not raised: the step is settled either way, and the next press corrects it."""
    try:
        await interaction.edit_original_response(
            content=text, view=cue_view(step_id, disabled=True), allowed_mentions=NO_MENTIONS
        )
    except discord.HTTPException as exc:
        log.warning("cue %s: could not edit its message: %s", step_id, exc, extra={"step_id": step_id})
        return False
    return True


def current_text(result: ControlResult) -> str | None:
    """What a cue message should say now that its step is settled, or ``None`` if it is not."""
    ref = result.cues[0] if result.cues else None
    if ref is None or ref.status is None or ref.status in STEP_OPEN:
        return None
    who = person(ref.settled_by) if ref.settled_by else None
    return settled_text(ref.status, who, reason=ref.why)


async def setup(bot: commands.Bot) -> None:
    """Loaded by ``EventBot.setup_hook`` as an extension: registers the cue buttons, so a press
    on any cue this bot (or an earlier process) posted reaches ``CueButton``."""
    bot.add_dynamic_items(CueButton)
