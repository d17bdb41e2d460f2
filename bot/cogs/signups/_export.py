"""``/event signups export run``: a run's sign-up list as a CSV file, for staff (issue 28 item 3).

Every sign-up of the run, seated, waiting and left, in click order, with a cell that would start
a spreadsheet formula quoted (``runner.signup_export``). Attached to an ephemeral answer: names
are for staff, not the channel. Any staff role may ask, as for ``/event status``.
"""

from __future__ import annotations

import io

import discord

from bot.errors import BotError
from bot.protocols import served
from bridge import signup_messages
from runner import attendance, signups
from runner.signup_export import export_run

# Discord's smallest attachment limit (8 MB): far above any sign-up list.
FILE_MAX = 8 * 1024 * 1024


async def export_signups(interaction: discord.Interaction, run: int) -> None:
    await interaction.response.defer(ephemeral=True, thinking=True)
    engine = served(interaction).services.engine
    if await signups.listing(engine, run) is None:
        raise BotError(f"Run {run} has no sign-up list (no such run, or its event has no signup:).")
    marks = await attendance.marks_of(engine, run)
    async with engine.connect() as conn:
        text = await export_run(conn, run, {member: mark.value for member, mark in marks.items()})
    data = text.encode("utf-8-sig")  # the BOM: spreadsheets then read the names' accents right
    if len(data) > FILE_MAX:
        raise BotError(f"Run {run}'s sign-up list is too large to attach ({len(data)} bytes).")
    title = await signup_messages.event_title(engine, run) or "event"
    rows = text.count("\r\n") - 1
    head = (
        f"📋 Sign-ups of run {run} ({discord.utils.escape_markdown(title[:100])}): {rows} row(s), attached."
    )
    await interaction.followup.send(
        head, ephemeral=True, file=discord.File(io.BytesIO(data), filename=f"signups-run-{run}.csv")
    )
