"""A run's sign-up message: its embed (the list per option, counts and capacities, when sign-ups
close), its buttons (one per option, and Leave), and the words a click is answered with.

The buttons' whole state is their custom id (``bot.custom_ids.SignupPress``), read back when
one is pressed (``bot.cogs.signups._cog.SignupButton``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import discord

from actions import limits
from bot.custom_ids import SignupPress
from bot.rendering import clip, timestamp
from runner import signups
from runner.signups import AlreadyIn, Confirmed, JoinAnswer, LeaveAnswer, Left, Moved, RefusedWhy, Waitlisted
from runner.states import RUN_TERMINAL, RunStatus, SignupStatus

LEAVE = SignupPress.LEAVE
NO_MENTIONS = discord.AllowedMentions.none()
OPEN_COLOUR, CLOSED_COLOUR = 0x2ECC71, 0x7F8C8D
# Discord's five buttons per row; Leave goes on a row of its own after the options.
PER_ROW = 5


def custom_id(run_id: int, choice: str) -> str:
    return SignupPress(run_id, choice).custom_id


def signup_view(listed: signups.SignupList, now: dt.datetime) -> discord.ui.View:
    """The buttons. Plain buttons: a press is dispatched by its custom id to
    ``bot.cogs.signups._cog.SignupButton`` (registered with the bot), not to this view. Once sign-ups
    close the option buttons are disabled (a click is still answered, "sign-ups are closed");
    Leave stays until the run is over."""
    closed = listed.is_closed(now)
    over = listed.run_status in RUN_TERMINAL
    view = discord.ui.View(timeout=None)
    for index, option in enumerate(listed.options):
        view.add_item(
            discord.ui.Button(
                label=clip(option.name, 80),
                style=discord.ButtonStyle.primary,
                custom_id=custom_id(listed.run_id, option.name),
                disabled=closed,
                row=index // PER_ROW,
            )
        )
    view.add_item(
        discord.ui.Button(
            label="Leave",
            style=discord.ButtonStyle.secondary,
            custom_id=custom_id(listed.run_id, LEAVE),
            disabled=over,
            row=min((len(listed.options) + PER_ROW - 1) // PER_ROW, 4),
        )
    )
    return view


def _names(members: list[signups.Signup], size: int) -> str:
    mentions = [f"<@{s.member_id}>" for s in members]
    text = ", ".join(mentions)
    if len(text) <= size:
        return text
    shown: list[str] = []
    for mention in mentions:
        if len(", ".join([*shown, mention])) + len(f" and {len(mentions)} more") > size:
            break
        shown.append(mention)
    return f"{', '.join(shown)} and {len(mentions) - len(shown)} more"


def signup_embed(listed: signups.SignupList, title: str, now: dt.datetime) -> discord.Embed:
    closed = listed.is_closed(now)
    if listed.run_status == RunStatus.CANCELLED:
        # A skipped date (or a cancel) must not read as an event that merely stopped taking names.
        when = "**Cancelled**: this date will not take place."
    elif closed:
        when = "Sign-ups are closed."
    elif listed.closes_at is None:
        when = "Sign-ups stay open until the event ends."
    else:
        when = f"Sign-ups close {timestamp(listed.closes_at, 'R')} ({timestamp(listed.closes_at, 'f')})."
    embed = discord.Embed(
        title=clip(f"Sign-ups: {title}", limits.EMBED_TITLE_MAX),
        description=f"Starts {timestamp(listed.starts_at, 'F')}. {when}",
        colour=CLOSED_COLOUR if closed else OPEN_COLOUR,
    )
    for option in listed.options[:25]:
        cap = f"/{option.capacity}" if option.capacity is not None else ""
        seated = _names(option.confirmed, 700) or "nobody yet"
        value = seated
        if option.waitlisted:
            value += f"\nWaiting ({len(option.waitlisted)}): {_names(option.waitlisted, 280)}"
        embed.add_field(
            name=clip(f"{option.name} ({len(option.confirmed)}{cap})", 256), value=value, inline=True
        )
    capacity = f"/{listed.definition.capacity}" if listed.definition.capacity is not None else ""
    embed.set_footer(text=f"{len(listed.confirmed)}{capacity} signed up · {len(listed.waitlisted)} waiting")
    return embed


def digest(embed: discord.Embed, view: discord.ui.View) -> str:
    """What an edit would show, as one hash: an edit equal to the last one is never sent."""
    shown = {"embed": embed.to_dict(), "buttons": [item.to_component_dict() for item in view.children]}
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()


def join_answer(answer: JoinAnswer, role_mentions: dict[str, str]) -> str:
    """The ephemeral answer to an option's button."""
    match answer:
        case Confirmed(option=option):
            return f"✅ You are signed up: {option}."
        case Waitlisted(option=option, place=place, event_full=True):
            return (
                f"⏳ The event is full: you are #{place} on the {option} waiting list. "
                "You will get a message if a seat frees up."
            )
        case Waitlisted(option=option, place=place):
            return f"⏳ {option} is full: you are #{place} on its waiting list. You will get a message if a seat frees up."
        case AlreadyIn(option=option, status=SignupStatus.CONFIRMED):
            return f"You are already signed up: {option}."
        case AlreadyIn(option=option, place=place):
            return f"You are already on the {option} waiting list (#{place})."
        case Moved(from_option=before, now=Confirmed(option=option)):
            return f"✅ Moved from {before} to {option}."
        case Moved(from_option=before, now=Waitlisted(option=option, place=place, event_full=True)):
            return f"⏳ You left {before}; the event is full: you are #{place} on the {option} waiting list."
        case Moved(from_option=before, now=Waitlisted(option=option, place=place)):
            return f"⏳ You left {before}; {option} is full: you are #{place} on its waiting list."
    assert isinstance(answer, signups.Refused)
    return refused_answer(answer, role_mentions)


def refused_answer(answer: signups.Refused, role_mentions: dict[str, str]) -> str:
    if answer.why == RefusedWhy.CLOSED:
        return "Sign-ups are closed."
    if answer.why == RefusedWhy.NOT_ALLOWED_ROLE:
        roles = ", ".join(role_mentions.get(alias, alias) for alias in answer.needed)
        return f"You need one of these roles to sign up: {roles}."
    if answer.why == RefusedWhy.NO_SUCH_OPTION:
        return f"That option no longer exists; the options are: {', '.join(answer.needed)}."
    if answer.why == RefusedWhy.RUN_OVER:
        return "This event is over."
    return "This event takes no sign-ups."


def leave_answer(answer: LeaveAnswer, role_mentions: dict[str, str]) -> str:
    if isinstance(answer, Left):
        if answer.was == SignupStatus.WAITLISTED:
            return f"You left the {answer.option} waiting list."
        return f"You are no longer signed up ({answer.option})."
    if isinstance(answer, signups.Refused):
        return refused_answer(answer, role_mentions)
    return "You were not signed up."


def promoted_text(title: str, option: str, starts_at: dt.datetime | None) -> str:
    when = f" It starts {timestamp(starts_at, 'F')}." if starts_at else ""
    return f"🎉 A seat freed up: you are now signed up for **{clip(title, 200)}** ({option}).{when}"


def signup_counts_line(listed: signups.SignupList) -> str:
    """``tank 1/2 · dps 6/6 (2 waiting) · 7/10 signed up``: what ``/event status`` shows."""
    parts = []
    for option in listed.options:
        cap = f"/{option.capacity}" if option.capacity is not None else ""
        waiting = f" ({len(option.waitlisted)} waiting)" if option.waitlisted else ""
        parts.append(f"{option.name} {len(option.confirmed)}{cap}{waiting}")
    capacity = f"/{listed.definition.capacity}" if listed.definition.capacity is not None else ""
    parts.append(f"{len(listed.confirmed)}{capacity} signed up")
    return clip(" · ".join(parts), limits.EMBED_FIELD_VALUE_MAX)


def with_signup_counts(embed: discord.Embed, listed: signups.SignupList | None) -> discord.Embed:
    """The status embed with a "Sign-ups" field first, when the run has a sign-up and a field
    is still free (Discord allows 25)."""
    if listed is not None and len(embed.fields) < limits.EMBED_FIELDS_MAX:
        embed.insert_field_at(0, name="Sign-ups", value=signup_counts_line(listed), inline=False)
    return embed
