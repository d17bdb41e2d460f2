"""What an attendance page and a member's record look like: an embed and the page's select
menu, each within Discord's limits (a select holds 25 options, a label 100 characters)."""

from __future__ import annotations

import discord

from actions import limits
from bot.custom_ids import AttendancePage, AttendancePick
from bot.rendering import clip, timestamp
from runner.attendance import PAGE, MemberRecord
from runner.attendance import AttendancePage as Page
from runner.states import Attendance

SHOWN = {
    Attendance.ATTENDED: "✅ came",
    Attendance.NO_SHOW: "❌ no-show",
    Attendance.LATE_CANCEL: "⚠️ late cancel",
}


def _mark(page: Page, member_id: str) -> str:
    mark = page.marks.get(member_id)
    return SHOWN[mark] if mark is not None else "not marked"


def page_embed(page: Page, title: str) -> discord.Embed:
    lines = [
        f"{page.page * PAGE + n}. <@{s.member_id}>: {_mark(page, s.member_id)}"
        for n, s in enumerate(page.members, 1)
    ]
    where = f" (page {page.page + 1} of {page.pages})" if page.pages > 1 else ""
    head = (
        f"Starts {timestamp(page.starts_at, 'F')}. Pick everyone below who came{where}: "
        "the others on this page are marked no-show. Marking again replaces the marks."
    )
    body = "\n".join(lines) or "Nobody is seated in this run."
    return discord.Embed(
        title=clip(f"Attendance: {title}, run {page.run_id}", limits.EMBED_TITLE_MAX),
        description=clip(f"{head}\n\n{body}", limits.EMBED_DESCRIPTION_MAX),
    )


def page_view(page: Page) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    if page.members:
        options = [
            discord.SelectOption(
                label=clip(s.member_name or s.member_id, 100),
                value=s.member_id,
                description=clip(f"{s.option}", 100),
                default=page.marks.get(s.member_id) == Attendance.ATTENDED,
            )
            for s in page.members
        ]
        view.add_item(
            discord.ui.Select(
                custom_id=AttendancePick(page.run_id, page.page).custom_id,
                placeholder="Who came?",
                min_values=0,
                max_values=len(options),
                options=options,
            )
        )
    if page.pages > 1:
        for label, to in (("Previous", page.page - 1), ("Next", page.page + 1)):
            view.add_item(
                discord.ui.Button(
                    label=label,
                    style=discord.ButtonStyle.secondary,
                    custom_id=AttendancePage(page.run_id, max(0, min(to, page.pages - 1))).custom_id,
                    disabled=not 0 <= to < page.pages,
                    row=1,
                )
            )
    return view


def record_embed(record: MemberRecord, name: str) -> discord.Embed:
    counts = " · ".join(f"{SHOWN[kind]} {record.counts.get(kind, 0)}" for kind in Attendance)
    lines = [
        f"{timestamp(starts, 'd')} **{clip(title, 80)}** (run {run_id}): {SHOWN[mark]}"
        for run_id, title, starts, mark in record.recent
    ]
    embed = discord.Embed(
        title=clip(f"Attendance record: {name}", limits.EMBED_TITLE_MAX),
        description=clip(
            f"<@{record.member_id}>: {counts}\n\n" + ("\n".join(lines) or "No marks yet."), 4000
        ),
    )
    return embed
