"""How the bot writes things in Discord, shared by every feature: names, people, timestamps,
status colours and icons, and the clipping that keeps each text inside Discord's limits.

Plain functions from the runner's values to strings and embeds, so every limit Discord puts on a
message is enforced in one place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import assert_never

import discord

from actions import limits
from bot.clock import as_utc
from runner.answers import ControlResult, Reason
from runner.history import Actor
from runner.states import RunStatus, StepStatus
from runner.views import StepView
from wiring.control_text import control_text, no_such_scope_head, started_head

REHEARSAL_MARK = "[REHEARSAL]"

# What a run view says of a step its run never reached (its run's steps were pruned, or the
# version changed under it): not one of the stored statuses.
NOT_REACHED = "not reached"


def status_colour(status: RunStatus | str) -> int:
    """The embed colour of a run in ``status`` (a view's, as stored)."""
    status = RunStatus(status)
    match status:
        case RunStatus.SCHEDULED:
            return 0x95A5A6
        case RunStatus.STARTING | RunStatus.ENDING:
            return 0x3498DB
        case RunStatus.RUNNING | RunStatus.COMPLETED:
            return 0x2ECC71
        case RunStatus.PAUSED:
            return 0xF1C40F
        case RunStatus.CANCELLED:
            return 0x7F8C8D
        case RunStatus.FAILED:
            return 0xE74C3C
        case RunStatus.MISSED:
            return 0xE67E22
        case _:
            assert_never(status)


def step_icon(step: StepView) -> str:
    if step.parked:
        return "✋"
    if step.status == NOT_REACHED:
        return "·"
    status = StepStatus(step.status)
    match status:
        case StepStatus.PENDING:
            return "⏳"
        case StepStatus.RUNNING:
            return "▶️"
        case StepStatus.DONE:
            return "✅"
        case StepStatus.SKIPPED:
            return "⏭️"
        case StepStatus.FAILED:
            return "❌"
        case StepStatus.CANCELLED:
            return "⏹️"
        case _:
            assert_never(status)


def clip(text: str, size: int) -> str:
    """``text`` cut to ``size`` characters, marking the cut."""
    return text if len(text) <= size else text[: max(size - 1, 0)] + "…"


def fit_list(
    head: str,
    items: Sequence[str],
    size: int = limits.CONTENT_MAX,
    *,
    sep: str = ", ",
    tail: str = "",
    item_max: int | None = None,
) -> str:
    """``head``, the items joined by ``sep``, then ``tail``, within ``size`` characters.

    The bot's one way to fit a list into a Discord limit: what does not fit is counted
    ("… and 480 more"), never cut off silently or mid-item. When the whole list does not fit,
    each item is first clipped to ``item_max``, so one long item cannot crowd out the rest."""
    whole = head + sep.join(items) + tail
    if len(whole) <= size:
        return whole
    if item_max is not None:
        items = [clip(item, item_max) for item in items]
    shown: list[str] = []
    used = len(head) + len(tail)
    for index, item in enumerate(items):
        grown = used + len(item) + (len(sep) if shown else 0)
        # Room must be left for the count of what would still be left out after this item.
        if grown + len(_more(len(items) - index - 1, sep, after_items=True)) > size:
            break
        shown.append(item)
        used = grown
    more = _more(len(items) - len(shown), sep, after_items=bool(shown))
    return clip(head + sep.join(shown) + more + tail, size)


def _more(left: int, sep: str, *, after_items: bool) -> str:
    if left == 0:
        return ""
    if not after_items:
        return f"{left} (too long to list)"
    return ("\n" if "\n" in sep else " ") + f"… and {left} more"


def timestamp(moment: dt.datetime, style: str = "R") -> str:
    """A Discord timestamp (``<t:…:R>``): every member sees it in their own time zone."""
    return discord.utils.format_dt(as_utc(moment), style)  # type: ignore[arg-type]


def run_name(title: str, scope: str, run_id: int, rehearsal: bool = False) -> str:
    mark = f"{REHEARSAL_MARK} " if rehearsal else ""
    where = f" ({scope})" if scope else ""
    return f"{mark}**{title}**{where} · run {run_id}"


# ── A control's answer ───────────────────────────────────────────────────────


def person(actor: Actor | None) -> str:
    """A person as Discord shows one: a mention when the history kept their id, otherwise the
    name as it was given (``cli``, ``rehearsal``, the schedule)."""
    if actor is None:
        return "someone"
    return f"<@{actor.id}>" if actor.id else actor.name


def control_answer(result: ControlResult) -> str:
    """A control's ephemeral answer: ``✅ …`` or ``Nothing changed: ….``, people as mentions,
    within Discord's content limit; a start of many scopes lists its runs as far as they fit."""
    if result.ok and result.reason is Reason.STARTED and len(result.run_ids) > 1:
        return fit_list(f"✅ {started_head(result)}", [str(r) for r in result.run_ids])
    if result.reason is Reason.NO_SUCH_SCOPE and any(result.scopes):
        # As many of the event's scopes as fit, each cut to a readable length.
        shown = dataclasses.replace(result, scope=clip(result.scope or "", 100))
        head = f"Nothing changed: {no_such_scope_head(shown)}"
        return fit_list(head, [s for s in result.scopes if s], tail=".", item_max=100)
    if result.reason is Reason.NO_SUCH_SCOPE:
        result = dataclasses.replace(result, scope=clip(result.scope or "", 100))
    text = control_text(result, person)
    return clip(f"✅ {text}" if result.ok else f"Nothing changed: {text}.", limits.CONTENT_MAX)


# ── /event status ────────────────────────────────────────────────────────────


def fit(embed: discord.Embed) -> discord.Embed:
    """Trim the longest field values until the embed is within Discord's 6,000 characters."""
    while len(embed) > limits.EMBED_TOTAL_MAX and embed.fields:
        index = max(range(len(embed.fields)), key=lambda i: len(embed.fields[i].value or ""))
        field = embed.fields[index]
        value = field.value or ""
        excess = len(embed) - limits.EMBED_TOTAL_MAX
        embed.set_field_at(
            index,
            name=field.name,
            value=clip(value, max(len(value) - excess - 1, 1)),
            inline=field.inline,
        )
    return embed
