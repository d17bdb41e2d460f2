"""``/event signups ...``: staff manage a run's sign-ups from Discord (issue 28 item 3).

``list`` shows staff the whole list (seated and waiting, in click order) with buttons to close or
reopen sign-ups and to export them; ``add``, ``move`` and ``remove`` change one member;
``close`` and ``reopen`` override the definition's closing time; ``export`` attaches the CSV.
Every change goes through the sign-up desk (``services.signups``), so it obeys the database's
rules as a click does (capacity, the waiting list, a promotion exactly once), writes a run-log
line naming who did it (which the staff log posts), and the sign-up message follows.

Changes need the ``signups`` capability; the list and the export any staff role. Every answer is
ephemeral: names are for staff, not the channel.
"""

from __future__ import annotations

import re
from typing import Any

import discord
from discord import app_commands

from actions import limits
from bot.cogs.signups._export import export_signups
from bot.cogs.signups._view import refused_answer
from bot.components import claimed_and_admitted
from bot.custom_ids import StaffSignupPress, StaffSignupVerb
from bot.errors import BotError, reply_to_error
from bot.protocols import Served, served
from bot.rendering import clip, timestamp
from bridge import signup_messages
from runner import attendance, history, signups
from runner.signups import (
    AlreadyIn,
    Confirmed,
    Left,
    Moved,
    NotSignedUp,
    Promotion,
    Refused,
    RefusedWhy,
    Waitlisted,
)
from runner.states import SignupOverride, SignupStatus

READ = {"capability": "staff"}
CHANGE = {"capability": "signups"}
# What the list shows of each option before "and N more" (an embed field holds 1,024 characters).
SHOWN_PER_OPTION = 20


def mention(member_id: str) -> str:
    return f"<@{member_id}>"


def staff_refused(answer: Refused, run_id: int) -> str:
    """A refusal as staff are told it (nothing was changed)."""
    match answer.why:
        case RefusedWhy.NO_SIGNUP:
            return f"Run {run_id} has no sign-up list (no such run, or its event has no signup:). Nothing was changed."
        case RefusedWhy.NO_SUCH_OPTION:
            return f"That is not an option of run {run_id}: use one of {', '.join(answer.needed)}. Nothing was changed."
        case RefusedWhy.RUN_OVER:
            return f"Run {run_id} is over. Nothing was changed."
    return refused_answer(answer, {})


def _promoted(promotion: Promotion | None, option: str) -> str:
    if promotion is None:
        return ""
    return f" {mention(promotion.member_id)} got the {option} seat from the waiting list."


def change_answer(
    answer: signups.JoinAnswer | signups.LeaveAnswer | NotSignedUp, member_id: str, run_id: int
) -> str:
    """What staff are told a change did, in the words of the database's answer."""
    who = mention(member_id)
    match answer:
        case Confirmed(option=option):
            return f"✅ {who} is signed up: {option}."
        case Waitlisted(option=option, place=place):
            return f"⏳ {option} is full: {who} is #{place} on its waiting list."
        case AlreadyIn(option=option, status=SignupStatus.CONFIRMED):
            return f"{who} is already signed up: {option}. Nothing was changed."
        case AlreadyIn(option=option, place=place):
            return f"{who} is already #{place} on the {option} waiting list. Nothing was changed."
        case Moved(from_option=before, now=Confirmed(option=option), promoted=promoted):
            return f"✅ {who} moved from {before} to {option}.{_promoted(promoted, before)}"
        case Moved(from_option=before, now=Waitlisted(option=option, place=place), promoted=promoted):
            moved = f"⏳ {who} left {before}; {option} is full: #{place} on its waiting list."
            return moved + _promoted(promoted, before)
        case Left(option=option, was=SignupStatus.WAITLISTED):
            return f"➖ {who} was taken off the {option} waiting list."
        case Left(option=option, promoted=promoted):
            return f"➖ {who} was removed from {option}.{_promoted(promoted, option)}"
        case NotSignedUp():
            return f"{who} is not signed up for run {run_id}. Nothing was changed."
        case Refused():
            return staff_refused(answer, run_id)
    raise AssertionError(f"an answer this command does not word: {answer!r}")


def override_answer(answer: bool | Refused, to: SignupOverride, run_id: int) -> str:
    if isinstance(answer, Refused):
        return staff_refused(answer, run_id)
    if to == SignupOverride.CLOSED:
        return f"🔒 Sign-ups of run {run_id} are closed." if answer else "They were closed already."
    done = f"🔓 Sign-ups of run {run_id} are open again until the run ends (or you close them)."
    return done if answer else "They were open already (reopened until the run ends)."


async def _listing(bot: Served, run_id: int) -> signups.SignupList:
    listed = await signups.listing(bot.services.engine, run_id)
    if listed is None:
        raise BotError(f"Run {run_id} has no sign-up list (no such run, or its event has no signup:).")
    return listed


def _state(listed: signups.SignupList, now: Any) -> str:
    if listed.override == SignupOverride.CLOSED:
        return "🔒 Closed by staff."
    if listed.is_closed(now):
        return "🔒 Closed."
    if listed.override == SignupOverride.OPEN or listed.closes_at is None:
        return "🔓 Open until the run ends."
    return f"🔓 Open; closes {timestamp(listed.closes_at, 'R')}."


def _member_line(label: str, member_id: str, no_shows: dict[str, int]) -> str:
    missed = no_shows.get(member_id, 0)
    return f"{label}. {mention(member_id)}" + (
        f" ({missed} no-show{'s' if missed > 1 else ''})" if missed else ""
    )


def staff_list_embed(
    listed: signups.SignupList, title: str, now: Any, no_shows: dict[str, int] | None = None
) -> discord.Embed:
    """The list as staff see it: every option's seated and waiting members, in click order, each
    with the runs they did not come to (``no_shows``)."""
    missed = no_shows or {}
    embed = discord.Embed(
        title=clip(f"Sign-ups (staff): {title}, run {listed.run_id}", limits.EMBED_TITLE_MAX),
        description=f"Starts {timestamp(listed.starts_at, 'F')}. {_state(listed, now)}",
    )
    for option in listed.options[: limits.EMBED_FIELDS_MAX]:
        lines = [_member_line(str(n), s.member_id, missed) for n, s in enumerate(option.confirmed, 1)]
        lines += [_member_line(f"W{n}", s.member_id, missed) for n, s in enumerate(option.waitlisted, 1)]
        shown = lines[:SHOWN_PER_OPTION]
        if len(lines) > len(shown):
            shown.append(f"and {len(lines) - len(shown)} more (export for all)")
        cap = f"/{option.capacity}" if option.capacity is not None else ""
        embed.add_field(
            name=clip(f"{option.name} ({len(option.confirmed)}{cap}, {len(option.waitlisted)} waiting)", 256),
            value=clip("\n".join(shown) or "nobody yet", limits.EMBED_FIELD_VALUE_MAX),
            inline=True,
        )
    return embed


def staff_list_view(run_id: int, listed: signups.SignupList, now: Any) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    closing: StaffSignupVerb = "reopen" if listed.is_closed(now) else "close"
    for verb, label, style in (
        (closing, "Reopen sign-ups" if closing == "reopen" else "Close sign-ups", discord.ButtonStyle.danger),
        ("export", "Export CSV", discord.ButtonStyle.secondary),
    ):
        press = StaffSignupPress(run_id, verb)
        view.add_item(discord.ui.Button(label=label, style=style, custom_id=press.custom_id))
    return view


async def show_list(interaction: discord.Interaction, run: int) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    listed = await _listing(bot, run)
    title = await signup_messages.event_title(bot.services.engine, run) or "event"
    now = bot.services.clock.now()
    members = [s.member_id for s in [*listed.confirmed, *listed.waitlisted]]
    missed = await attendance.no_shows(bot.services.engine, members)
    await interaction.followup.send(
        embed=staff_list_embed(listed, title, now, missed),
        view=staff_list_view(run, listed, now),
        ephemeral=True,
    )


def _staff(interaction: discord.Interaction) -> history.Actor:
    return history.Actor(str(interaction.user.id), interaction.user.display_name)


def _member(member: discord.Member | discord.User) -> history.Actor:
    return history.Actor(str(member.id), member.display_name)


async def _answer(interaction: discord.Interaction, text: str) -> None:
    await interaction.followup.send(
        clip(text, limits.CONTENT_MAX), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
    )


async def add_member(interaction: discord.Interaction, run: int, member: discord.Member, option: str) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    desk, now = bot.services.signups, bot.services.clock.now()
    answer = await desk.add_by_staff(run, _member(member), option, _staff(interaction), now)
    await _answer(interaction, change_answer(answer, str(member.id), run))


async def move_member(
    interaction: discord.Interaction, run: int, member: discord.Member, option: str
) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    desk, now = bot.services.signups, bot.services.clock.now()
    answer = await desk.move_by_staff(run, _member(member), option, _staff(interaction), now)
    await _answer(interaction, change_answer(answer, str(member.id), run))


async def remove_member(interaction: discord.Interaction, run: int, member: discord.Member) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    desk, now = bot.services.signups, bot.services.clock.now()
    answer: signups.LeaveAnswer = await desk.remove_by_staff(run, _member(member), _staff(interaction), now)
    if isinstance(answer, NotSignedUp) and await signups.listing(bot.services.engine, run) is None:
        answer = Refused(RefusedWhy.NO_SIGNUP)  # nobody is signed up to a run with no list at all
    await _answer(interaction, change_answer(answer, str(member.id), run))


async def _override(interaction: discord.Interaction, run: int, to: SignupOverride) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    bot = served(interaction)
    answer = await bot.services.signups.override(run, to, _staff(interaction), bot.services.clock.now())
    await _answer(interaction, override_answer(answer, to, run))


async def close_signups(interaction: discord.Interaction, run: int) -> None:
    await _override(interaction, run, SignupOverride.CLOSED)


async def reopen_signups(interaction: discord.Interaction, run: int) -> None:
    await _override(interaction, run, SignupOverride.OPEN)


async def option_choices(interaction: discord.Interaction, typed: str) -> list[app_commands.Choice[str]]:
    """The options of the run typed in ``run`` (none before it is)."""
    run = getattr(interaction.namespace, "run", None)
    if not isinstance(run, int):
        return []
    listed = await signups.listing(served(interaction).services.engine, run)
    names = [o.name for o in listed.options] if listed else []
    return [app_commands.Choice(name=n, value=n) for n in names if typed.lower() in n.lower()][:25]


class StaffSignupButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=StaffSignupPress.TEMPLATE
):
    """Close, Reopen or Export under the staff's list, rebuilt from its custom id."""

    def __init__(self, run_id: int, verb: StaffSignupVerb) -> None:
        press = StaffSignupPress(run_id, verb)
        super().__init__(discord.ui.Button(label=verb, custom_id=press.custom_id))
        self.press = press

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> StaffSignupButton:
        press = StaffSignupPress.from_match(match)
        return cls(press.run_id, press.verb)

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await claimed_and_admitted(interaction, "staff" if self.press.verb == "export" else "signups")

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            run_id = self.press.run_id
            if self.press.verb == "export":
                await export_signups(interaction, run_id)
            else:
                to = SignupOverride.CLOSED if self.press.verb == "close" else SignupOverride.OPEN
                await _override(interaction, run_id, to)
        except Exception as exc:
            await reply_to_error(interaction, exc)


RUN = "The run (its number, from /event list or upcoming)"


def add_commands(group: app_commands.Group) -> app_commands.Group:
    """``/event signups ...`` added to ``/event`` (``group``): the running bot's and sync's."""
    signups_group = app_commands.Group(name="signups", description="Manage a run's sign-ups", parent=group)
    member = "The member"
    option = "The option (role) to sign them up in"
    commands: list[tuple[str, str, Any, dict[str, str], dict[str, Any]]] = [
        ("list", "A run's whole sign-up list, with Close/Reopen and Export", show_list, {"run": RUN}, READ),
        (
            "add",
            "Sign a member up (capacity and waiting list hold)",
            add_member,
            {"run": RUN, "member": member, "option": option},
            CHANGE,
        ),
        (
            "move",
            "Move a signed-up member to another option",
            move_member,
            {"run": RUN, "member": member, "option": option},
            CHANGE,
        ),
        (
            "remove",
            "Take a member off the list (a seat goes to the first waiting)",
            remove_member,
            {"run": RUN, "member": member},
            CHANGE,
        ),
        ("close", "Close sign-ups now", close_signups, {"run": RUN}, CHANGE),
        ("reopen", "Reopen sign-ups until the run ends", reopen_signups, {"run": RUN}, CHANGE),
        (
            "export",
            "A run's sign-up list as a CSV file (seated, waiting and left)",
            export_signups,
            {"run": RUN},
            READ,
        ),
    ]
    for name, description, callback, described, extras in commands:
        command: app_commands.Command[Any, ..., None] = app_commands.Command(
            name=name,
            description=description,
            callback=app_commands.describe(**described)(callback),
            parent=signups_group,
            extras=extras,
        )
        if "option" in described:
            command.autocomplete("option")(option_choices)
        signups_group.add_command(command)
    # A group made with a parent is added to it by discord.py itself.
    return group
