"""GM cues in Discord: the message, its Confirm / Skip buttons, and what a click does.

The buttons are ``DynamicItem``s whose whole state is the ``custom_id`` (``cue:<step_id>:confirm``),
registered in ``setup_hook``: a click works after a restart, and in whichever bot process
Discord hands it to, because the step's state lives in the database and nowhere else.

A click by a member without the ``cue`` capability gets an ephemeral refusal and changes nothing.
A GM's click confirms or skips the parked step through the engine's controls (which wake the
runner, so the next step goes out at once) and edits the message: buttons disabled, "Confirmed
by @name <t:…:R>". A click that lost (a second click, a cue of a cancelled run) is told what
happened, ephemerally, and the message is brought up to date.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import discord

from actions import limits
from actions.delivery import Cue
from bot.errors import reply_to_error
from bot.permissions import actor_of, refusal
from bot.rendering import REHEARSAL_MARK, clip, control_answer, fit, person, timestamp
from runner.controls import ControlResult, CueRef
from runner.views import run_view

if TYPE_CHECKING:
    from bot.app import EventBot

log = logging.getLogger(__name__)

CUE_TEMPLATE = r"cue:(?P<step_id>[0-9]+):(?P<verb>confirm|skip)"
VERBS = {"confirm": ("Confirm", discord.ButtonStyle.success), "skip": ("Skip", discord.ButtonStyle.secondary)}
NO_MENTIONS = discord.AllowedMentions.none()


class CueButton(discord.ui.DynamicItem[discord.ui.Button], template=CUE_TEMPLATE):
    def __init__(self, step_id: int, verb: str, *, disabled: bool = False) -> None:
        label, style = VERBS[verb]
        super().__init__(
            discord.ui.Button(label=label, style=style, custom_id=f"cue:{step_id}:{verb}", disabled=disabled)
        )
        self.step_id = step_id
        self.verb = verb

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Button, match: re.Match[str], /
    ) -> CueButton:
        return cls(int(match["step_id"]), match["verb"])

    async def callback(self, interaction: discord.Interaction) -> None:  # type: ignore[override]
        # discord.py only logs what a DynamicItem callback raises (no View.on_error is called),
        # so the boundary is invoked here.
        try:
            await click(interaction, self.step_id, self.verb)
        except Exception as exc:
            await reply_to_error(interaction, exc)


def cue_view(step_id: int, *, disabled: bool = False) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for verb in VERBS:
        view.add_item(CueButton(step_id, verb, disabled=disabled))
    return view


def cue_embed(cue: Cue) -> discord.Embed:
    """Event (as the author line), the cue's title, the GM's instructions, phase / step / scope.
    Every part is bounded by the definition's own limits, so the embed always fits."""
    context = cue.context
    embed = discord.Embed(
        title=clip(cue.title, limits.EMBED_TITLE_MAX),
        description=clip(cue.instructions, limits.EMBED_DESCRIPTION_MAX),
        colour=0x5865F2,
    )
    if context is not None:
        embed.set_author(name=clip(context.event_title, limits.EMBED_TITLE_MAX))
        embed.add_field(name="Phase", value=clip(context.phase_label, 1024), inline=True)
        step = f"{context.step_index + 1}. {context.step_label or cue.title}"
        embed.add_field(name="Step", value=clip(step, 1024), inline=True)
        if context.scope:
            embed.add_field(name="Scope", value=clip(context.scope, 1024), inline=True)
    rehearsal = bool(context and context.rehearsal)
    embed.set_footer(
        text=f"{REHEARSAL_MARK + ' nothing here is live · ' if rehearsal else ''}run {cue.run_id} · step {cue.step_id}"
    )
    return fit(embed)


def settled_text(status: str, who: str | None, *, at: Any = None, reason: str | None = None) -> str:
    """The line a settled cue message shows instead of its ping."""
    when = f" {timestamp(at)}" if at is not None else ""
    by = f" by {who}" if who else ""
    if status == "done":
        return f"✅ Confirmed{by}{when}"
    if status == "skipped":
        return f"⏭️ Skipped{by}{when}"
    if status == "cancelled":
        return clip(f"⏹️ Cancelled{by}{when}" + (f": {reason}" if reason else ""), limits.CONTENT_MAX)
    if status == "failed":
        return "❌ This step failed; see /event status"
    return f"This cue is {status}"


async def click(interaction: discord.Interaction, step_id: int, verb: str) -> None:
    bot: EventBot = interaction.client  # type: ignore[assignment]
    reason = refusal(bot.config, interaction, "cue")
    if reason is not None:
        await interaction.response.send_message(reason, ephemeral=True)
        return
    # Answer within Discord's three seconds whatever the database does: a deferred update
    # (nothing visible), then the message is edited when the engine has answered.
    await interaction.response.defer()
    controls = bot.services.controls
    actor = actor_of(interaction.user)
    # The step id and verb come from the custom id, which only Discord's own check ties to this
    # message: the control acts only on the GM cue posted as this very message (a Skip naming a
    # pending announcement, or a copied button naming another cue, is refused). The guild was
    # checked by ``refusal`` above.
    message_id = str(interaction.message.id) if interaction.message is not None else None
    result = await controls.settle_cue(step_id, verb, actor=actor, message_id=message_id)
    ids = {"run_id": result.run_id, "step_id": step_id}
    if result.ok:
        status = "done" if verb == "confirm" else "skipped"
        log.info("cue %s %s by %s", step_id, status, actor, extra=ids)
        text = settled_text(status, interaction.user.mention, at=bot.services.clock.now())
        if not await _show(interaction, step_id, text):
            word = "Confirmed" if verb == "confirm" else "Skipped"
            await interaction.followup.send(
                f"{word}, but Discord did not let me update the message.", ephemeral=True
            )
        return
    await interaction.followup.send(control_answer(result), ephemeral=True)
    text = await current_text(bot, result)
    if text is not None:
        await _show(interaction, step_id, text)


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


async def current_text(bot: EventBot, result: ControlResult) -> str | None:
    """What a cue message should say now that its step is settled, or ``None`` if it is not."""
    ref = result.cues[0] if result.cues else None
    if ref is None or ref.status in ("pending", "running") or result.run_id is None:
        return None
    run = await run_view(bot.services.engine, result.run_id, bot.services.versions)
    step = next((s for p in (run.phases if run else []) for s in p.steps if s.id == ref.step_id), None)
    who = person(step.settled_by) if step and step.settled_by else None
    reason = run.last_error if run is not None and ref.status == "cancelled" else None
    return settled_text(ref.status, who, reason=reason)


async def mark_settled(bot: discord.Client, refs: tuple[CueRef, ...], text: str) -> int:
    """Edit the posted messages of these cues (after a cancel or a skip from a command): buttons
    disabled, ``text`` in place of the ping. Answers how many were edited."""
    edited = 0
    for ref in refs:
        posted = (ref.result or {}).get("posted") if isinstance(ref.result, dict) else None
        if not posted:
            continue
        channel = bot.get_partial_messageable(int(posted["channel_id"]))
        try:
            await channel.get_partial_message(int(posted["message_id"])).edit(
                content=text, view=cue_view(ref.step_id, disabled=True), allowed_mentions=NO_MENTIONS
            )
            edited += 1
        except discord.HTTPException as exc:
            # A deleted message or a lost permission must not undo the control that already acted.
            log.warning(
                "could not edit the message of cue %s: %s",
                ref.step_id,
                exc,
                extra={"run_id": ref.run_id, "step_id": ref.step_id},
            )
    return edited
