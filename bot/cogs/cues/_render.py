"""A GM cue's message: its embed, its Confirm / Skip buttons, the line it shows once settled, and
bringing a posted one up to date.

The one place a cue message is drawn. The Discord delivery posts it and closes it when its run
ends; the click handler (``bot.cogs.cues._cog``) and ``/event cancel`` / ``skip`` mark it settled. The
buttons' whole state is their ``custom_id`` (``bot.custom_ids.CuePress``), read back when one
is pressed.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import assert_never

import discord

from actions import limits
from actions.delivery import Cue
from bot.cogs.approvals._render import approval_view
from bot.custom_ids import AttendancePage, CuePress, CueVerb
from bot.rendering import REHEARSAL_MARK, clip, fit, timestamp
from runner.approvals import asks_approval
from runner.controls import CueRef
from runner.states import Control, StepStatus
from runner.views import step_name

log = logging.getLogger(__name__)

VERBS: dict[CueVerb, tuple[str, discord.ButtonStyle]] = {
    Control.CONFIRM: ("Confirm", discord.ButtonStyle.success),
    Control.SKIP: ("Skip", discord.ButtonStyle.secondary),
}
NO_MENTIONS = discord.AllowedMentions.none()


def cue_button(step_id: int, verb: CueVerb, *, disabled: bool = False) -> discord.ui.Button[discord.ui.View]:
    label, style = VERBS[verb]
    return discord.ui.Button(
        label=label, style=style, custom_id=CuePress(step_id, verb).custom_id, disabled=disabled
    )


def cue_view(step_id: int, *, disabled: bool = False, attendance_of: int | None = None) -> discord.ui.View:
    """The cue's buttons. Plain buttons: a press is dispatched by its custom id to
    ``bot.cogs.cues._cog.CueButton`` (registered with the bot), not to this view. A cue that
    takes attendance (``attendance_of``: its run) also has "Take attendance", which opens the
    run's seated members for the GM (``bot.cogs.attendance``)."""
    view = discord.ui.View(timeout=None)
    for verb in VERBS:
        view.add_item(cue_button(step_id, verb, disabled=disabled))
    if attendance_of is not None:
        press = AttendancePage(attendance_of, 0)
        view.add_item(
            discord.ui.Button(
                label="Take attendance", style=discord.ButtonStyle.primary, custom_id=press.custom_id
            )
        )
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
        # Named by its id, as the footer, /event skip and /event status name it: its place in
        # the phase beside the id read as two steps ("1. Open the gates" over "step 2").
        step = step_name(cue.step_id, clip(context.step_label or cue.title, 900))
        embed.add_field(name="Step", value=clip(step, 1024), inline=True)
        if context.scope:
            embed.add_field(name="Scope", value=clip(context.scope, 1024), inline=True)
    rehearsal = bool(context and context.rehearsal)
    embed.set_footer(
        text=f"{REHEARSAL_MARK + ' nothing here is live · ' if rehearsal else ''}run {cue.run_id} · {step_name(cue.step_id)}"
    )
    return fit(embed)


def settled_text(
    status: StepStatus | str, who: str | None, *, at: dt.datetime | None = None, reason: str | None = None
) -> str:
    """The line a cue message whose step is in ``status`` shows instead of its ping."""
    when = f" {timestamp(at)}" if at is not None else ""
    by = f" by {who}" if who else ""
    status = StepStatus(status)
    match status:
        case StepStatus.DONE:
            return f"✅ Confirmed{by}{when}"
        case StepStatus.SKIPPED:
            return f"⏭️ Skipped{by}{when}"
        case StepStatus.CANCELLED:
            return clip(f"⏹️ Cancelled{by}{when}" + (f": {reason}" if reason else ""), limits.CONTENT_MAX)
        case StepStatus.FAILED:
            return "❌ This step failed; see /event status"
        case StepStatus.PENDING | StepStatus.RUNNING:
            return f"This cue is {status}"
        case _:
            assert_never(status)


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
            # A step parked on its approval request keeps its own (Approve / Skip) buttons.
            view = approval_view if asks_approval(ref.result) else cue_view
            await channel.get_partial_message(int(posted["message_id"])).edit(
                content=text, view=view(ref.step_id, disabled=True), allowed_mentions=NO_MENTIONS
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
