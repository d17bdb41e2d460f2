"""A run's live message as Discord shows it: ``bridge.live.LiveView`` to a ``discord.Embed``.

Plain functions, so the loop that keeps the message edited (``bot.cogs.live._loop``) only decides
when to send; what a moderator reads is decided here, within Discord's limits (every line is
clipped, the links are fitted as many as fit and counted beyond that, ``fit`` bounds the whole).
The render holds no "now": two renders of one state are identical, which is what lets the loop
skip an edit that would change nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import assert_never

import discord

from actions import limits
from bot.cogs.signups._view import signup_counts_line
from bot.rendering import clip, fit, fit_list, person, run_name, status_colour, timestamp
from bridge.live import HumanAction, LiveView, PostedLink, Waiting, WaitKind
from runner.states import Control, Health, RunStatus


def headline(status: RunStatus | str) -> str:
    """What the embed's title says for ``status``: the one word a moderator scans for."""
    status = RunStatus(status)
    match status:
        case RunStatus.SCHEDULED:
            return "🕒 Not started yet"
        case RunStatus.STARTING:
            return "▶️ Starting"
        case RunStatus.RUNNING:
            return "▶️ Running"
        case RunStatus.PAUSED:
            return "⏸️ Paused"
        case RunStatus.ENDING:
            return "▶️ Ending"
        case RunStatus.COMPLETED:
            return "✅ Completed"
        case RunStatus.CANCELLED:
            return "⏹️ Cancelled"
        case RunStatus.FAILED:
            return "❌ Failed"
        case RunStatus.MISSED:
            return "⌛ Missed"
        case _:
            assert_never(status)


def action_words(what: Control) -> str:
    """A control or a cue button, as the "last action" line words it."""
    match what:
        case Control.START:
            return "Started"
        case Control.PAUSE:
            return "Paused"
        case Control.RESUME:
            return "Resumed"
        case Control.CANCEL:
            return "Cancelled"
        case Control.RETRY:
            return "Retried"
        case Control.SKIP:
            return "Skipped"
        case Control.CONFIRM:
            return "Confirmed"
        case Control.APPROVE:
            return "Approved"
        case _:
            assert_never(what)


LINE_MAX = 300
LINKS_MAX = limits.EMBED_FIELD_VALUE_MAX


def jump_link(guild_id: int, channel_id: int, message_id: int) -> str:
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def waiting_line(waiting: Waiting, step: str | None) -> str:
    """What the run waits for, and until when, in the words a moderator acts on."""
    kind = waiting.kind
    step_text = step or "the step"
    if kind is WaitKind.GM:
        return f"✋ Waiting for a GM to press Confirm on {step_text}"
    if kind is WaitKind.APPROVAL:
        return f"🔒 Waiting for staff to approve {step_text} (its action is risky)"
    if kind is WaitKind.WAIT and waiting.until is not None:
        return (
            f"⏳ Waiting until {timestamp(waiting.until, 'T')} ({timestamp(waiting.until)}), then {step_text}"
        )
    if kind is WaitKind.RETRY and waiting.until is not None:
        error = clip(waiting.error or "an error", LINE_MAX)
        return f"🔁 {step_text} failed ({error}); retrying {timestamp(waiting.until)}"
    if kind is WaitKind.PAUSED:
        if waiting.by is not None:
            return f"⏸️ Paused by {person(waiting.by)}: /event resume carries on"
        error = f": {clip(waiting.error, LINE_MAX)}" if waiting.error else ""
        return f"⏸️ Paused after {step_text} failed{error}. /event retry or /event skip carries on"
    if kind is WaitKind.BLOCKED:
        key = f" `{clip(waiting.key, 100)}`" if waiting.key else ""
        return f"⛔ Blocked: run {waiting.holder_run_id} holds the key{key}; starts when it ends"
    if kind is WaitKind.START and waiting.until is not None:
        return f"🕒 Starts {timestamp(waiting.until)}"
    if kind is WaitKind.ACTION:
        return f"▶️ {step_text} is being carried out"
    return f"▶️ {step_text}"


def action_line(action: HumanAction) -> str:
    known = action.what in set(Control)
    words = action_words(Control(action.what)) if known else action.what.capitalize()
    what = f"{words} {action.step}" if action.step else words
    line = f"{what} by {person(action.by)} {timestamp(action.at)}"
    if action.note:
        line += f": {clip(action.note, LINE_MAX)}"
    return line


def ending_line(view: LiveView) -> str:
    run = view.run
    when = f" {timestamp(run.ended_at)}" if run.ended_at is not None else ""
    ending = view.ending
    by = f" by {person(ending.by)}" if ending is not None and ending.by is not None else ""
    why = f": {clip(ending.why, LINE_MAX)}" if ending is not None and ending.why else ""
    if run.status == RunStatus.COMPLETED:
        why = ""
    return f"Ended{when}: **{run.status}**{by}{why}"


def _links(guild_id: int | None, posted: list[PostedLink]) -> str:
    if guild_id is None or not posted:
        return ""
    items = [f"[{clip(p.step, 80)}]({jump_link(guild_id, p.channel_id, p.message_id)})" for p in posted]
    return fit_list("", items, LINKS_MAX, sep="\n", item_max=200)


def live_embed(view: LiveView, guild_id: int | None) -> discord.Embed:
    """The live message for ``view``; ``guild_id`` makes the jump links."""
    run = view.run
    lines = [
        run_name(clip(run.title, 200), clip(run.scope, 100), run.id, run.rehearsal),
        f"Status: **{run.status}** · Health: **{run.health}**",
    ]
    if view.phase_index is not None and view.phase_label is not None:
        lines.append(f"Phase {view.phase_index} of {view.phase_count}: **{clip(view.phase_label, 200)}**")
    if view.step is not None and not view.ended:
        lines.append(f"Step: {clip(view.step, 250)}")
    if view.waiting is not None:
        lines.append(waiting_line(view.waiting, clip(view.step, 250) if view.step else None))
    if run.health == Health.STALLED and run.in_flight:
        lines.append("⚠️ Stalled: no runner has moved this run on when it should have")
    if view.ended:
        lines.append(ending_line(view))
    embed = discord.Embed(
        title=headline(run.status),
        description=clip("\n".join(lines), limits.EMBED_DESCRIPTION_MAX),
        colour=status_colour(run.status),
    )
    if view.signup_list is not None:
        # The counts only (as ``/event status`` words them): names are on the sign-up message,
        # and a member swapping for another changes nothing staff need to see edited.
        embed.add_field(name="Sign-ups", value=signup_counts_line(view.signup_list), inline=False)
    if view.last_action is not None:
        embed.add_field(name="Last action", value=clip(action_line(view.last_action), 1024), inline=False)
    links = _links(guild_id, view.posted)
    if links:
        embed.add_field(name="Posted", value=links, inline=False)
    footer = "Final: this message is no longer updated" if view.ended else "Updated as the run moves"
    embed.set_footer(text=f"{clip(run.definition_key, 64)} · {footer}")
    return fit(embed)


def digest(embed: discord.Embed) -> str:
    """sha256 of what Discord would be sent: equal renders are never sent twice."""
    return hashlib.sha256(json.dumps(embed.to_dict(), sort_keys=True).encode()).hexdigest()
