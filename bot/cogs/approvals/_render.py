"""An approval card: the step its action's risk held back, the action, the risk and the params
summarised, with Approve and Skip; and the line it shows once answered.

The Discord delivery posts it (``DiscordDelivery.post_approval``); the click handler
(``bot.cogs.approvals._cog``) marks it answered. The buttons' whole state is their custom id
(``bot.custom_ids.ApprovalPress``).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, assert_never

import discord

from actions import limits
from bot.custom_ids import ApprovalPress, ApprovalVerb
from bot.rendering import REHEARSAL_MARK, clip, fit, timestamp
from runner.approvals import ApprovalRequest
from runner.states import Control, StepStatus
from runner.views import StepContext, step_name

VERBS: dict[ApprovalVerb, tuple[str, discord.ButtonStyle]] = {
    Control.APPROVE: ("Approve", discord.ButtonStyle.danger),
    Control.SKIP: ("Skip", discord.ButtonStyle.secondary),
}
NO_MENTIONS = discord.AllowedMentions.none()
# How much of the params the card shows: enough to recognise the step, never a wall of JSON.
PARAMS_SHOWN = 900
PARAM_VALUE_SHOWN = 120


def approval_view(step_id: int, *, disabled: bool = False) -> discord.ui.View:
    """Approve and Skip. Plain buttons: a press is dispatched by its custom id to
    ``bot.cogs.approvals._cog.ApprovalButton``, registered with the bot."""
    view = discord.ui.View(timeout=None)
    for verb, (label, style) in VERBS.items():
        press = ApprovalPress(step_id, verb)
        view.add_item(
            discord.ui.Button(label=label, style=style, custom_id=press.custom_id, disabled=disabled)
        )
    return view


def params_summary(params: dict[str, Any]) -> str:
    """``key: value`` a line, each value cut short, the whole within ``PARAMS_SHOWN``."""
    if not params:
        return "(none)"
    lines = []
    for key, value in params.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"{key}: {clip(' '.join(shown.split()), PARAM_VALUE_SHOWN)}")
    return clip("\n".join(lines), PARAMS_SHOWN)


def approval_content(request: ApprovalRequest) -> str:
    head = f"⚠️ A {request.risk} step waits for an approval before it runs."
    return f"{REHEARSAL_MARK} {head}" if request.rehearsal else head


def approval_embed(request: ApprovalRequest, context: StepContext | None) -> discord.Embed:
    """Event, step, action and risk, and the params summarised; every part bounded."""
    label = request.label or (context.step_label if context else None)
    embed = discord.Embed(
        title=clip(f"Approve {step_name(request.step_id, label)}?", limits.EMBED_TITLE_MAX),
        description=clip(
            f"**{request.action_label}** (`{request.action_id}`) is **{request.risk}**: staff with the "
            "approve capability decide whether it runs. Skip and the run carries on without it.",
            limits.EMBED_DESCRIPTION_MAX,
        ),
        colour=0xED4245 if request.risk == "destructive" else 0xFEE75C,
    )
    if context is not None:
        embed.set_author(name=clip(context.event_title, limits.EMBED_TITLE_MAX))
        embed.add_field(name="Phase", value=clip(context.phase_label, 1024), inline=True)
    if request.scope:
        embed.add_field(name="Scope", value=clip(request.scope, 1024), inline=True)
    embed.add_field(name="Params", value=clip(params_summary(request.params), 1024), inline=False)
    embed.set_footer(text=f"run {request.run_id} · {step_name(request.step_id)} · {request.risk}")
    return fit(embed)


def approval_message(request: ApprovalRequest, context: StepContext | None) -> dict[str, Any]:
    """What ``DiscordDelivery.post_approval`` sends: the card, its buttons, and no ping."""
    return {
        "content": approval_content(request),
        "embed": approval_embed(request, context),
        "view": approval_view(request.step_id),
        "allowed_mentions": NO_MENTIONS,
    }


def answered_text(
    status: StepStatus | str, who: str | None, *, at: dt.datetime | None = None, reason: str | None = None
) -> str:
    """The line an approval card shows once its step is approved (``pending``: it runs next),
    skipped, cancelled or settled otherwise."""
    when = f" {timestamp(at)}" if at is not None else ""
    by = f" by {who}" if who else ""
    status = StepStatus(status)
    match status:
        case StepStatus.PENDING | StepStatus.RUNNING | StepStatus.DONE:
            return f"✅ Approved{by}{when}"
        case StepStatus.SKIPPED:
            return f"⏭️ Skipped{by}{when}"
        case StepStatus.CANCELLED:
            return clip(f"⏹️ Cancelled{by}{when}" + (f": {reason}" if reason else ""), limits.CONTENT_MAX)
        case StepStatus.FAILED:
            return "❌ This step failed; see /event status"
        case _:
            assert_never(status)
