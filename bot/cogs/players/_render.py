"""What ``/events`` shows a player: one line per occurrence (its Discord timestamp, its open
seats, the member's own state), cut into pages that fit one embed (at most ``PER_PAGE`` entries
and ``PAGE_CHARS`` characters of description), and the embed of one page.

Pages are cut by the same function whenever a list is shown, so a page number (what Previous and
Next carry in their custom ids) names the same stretch of the list as long as it has not changed;
when it has, a press shows the page of that number in the list as it is now, or the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import discord

from actions import limits
from bot.rendering import clip, timestamp
from runner.states import SignupStatus
from runner.views import Coming

# Discord lists at most 25 of anything; a page holds no more entries than that.
PER_PAGE = 25
# ``/events mine`` has a Leave button per entry: four rows of five, the fifth row for paging.
PER_PAGE_MINE = 20
# The description's limit, less the room kept for the lines above the list (a note, the head).
PAGE_CHARS = limits.EMBED_DESCRIPTION_MAX - 400
TITLE_MAX = 80
NOTE_MAX = 150
SCOPE_MAX = 40
UPCOMING_COLOUR = MINE_COLOUR = 0x5865F2
UPCOMING_TITLE = "Coming up"
MINE_TITLE = "Your sign-ups"
UPCOMING_HEAD = "The next events, in your own time zone. `/events mine` lists your sign-ups, each with Leave."
MINE_HEAD = "The events you are signed up to or waiting for. Leave gives your place up."
NOTHING_COMING = "No event is scheduled yet."
NOTHING_MINE = "You are not signed up to any event. `/events upcoming` shows what is coming."


def seats_text(entry: Coming) -> str | None:
    """``3 seats open``, ``full, 2 waiting``, ``sign-ups closed``; ``None``: no sign-ups."""
    seats = entry.seats
    if seats is None:
        return None
    if seats.closed:
        return "sign-ups closed"
    if seats.open is None:
        free = "no seat limit"
    elif seats.open == 0:
        free = "full"
    else:
        free = f"{seats.open} seat{'s' if seats.open != 1 else ''} open"
    if seats.waiting:
        free += f", {seats.waiting} waiting"
    if not seats.booked:
        free += " (sign-ups open once it is booked)"
    return free


def own_text(entry: Coming) -> str | None:
    """The member's own state: ``you: seated (tank)``, ``you: waiting for dps (#2)``, ``you: not
    signed up``; ``None`` for an event that takes no sign-ups."""
    own = entry.own
    if own is None:
        return None if entry.seats is None else "you: not signed up"
    if own.status == SignupStatus.CONFIRMED:
        return f"✅ you: seated ({own.option})"
    return f"⏳ you: waiting for {own.option} (#{own.place})"


def entry_line(number: int, entry: Coming) -> str:
    """One entry, every part clipped to a known size so no line can crowd a page out."""
    # Escaped: a title with ``*`` or ``_`` in it must not turn the rest of the line bold.
    title = discord.utils.escape_markdown(clip(entry.title, TITLE_MAX))
    scope = f" ({discord.utils.escape_markdown(clip(entry.scope, SCOPE_MAX))})" if entry.scope else ""
    parts = [
        f"{number}. **{title}**{scope}",
        f"{timestamp(entry.at, 'f')} ({timestamp(entry.at, 'R')})",
        *(text for text in (seats_text(entry), own_text(entry)) if text is not None),
    ]
    return " · ".join(parts)


@dataclass(frozen=True)
class Page:
    number: int
    count: int
    # (the entry's number in the whole list, the entry)
    entries: list[tuple[int, Coming]]
    lines: list[str]
    total: int


def pages(entries: Sequence[Coming], per_page: int) -> list[Page]:
    """``entries`` cut into pages: each at most ``per_page`` entries and ``PAGE_CHARS``
    characters of lines. Always at least one page (an empty list is one empty page)."""
    cut: list[list[tuple[int, Coming, str]]] = [[]]
    used = 0
    for number, entry in enumerate(entries, start=1):
        line = entry_line(number, entry)
        if cut[-1] and (len(cut[-1]) >= per_page or used + len(line) + 1 > PAGE_CHARS):
            cut.append([])
            used = 0
        cut[-1].append((number, entry, line))
        used += len(line) + 1
    return [
        Page(index, len(cut), [(n, e) for n, e, _ in chunk], [line for _, _, line in chunk], len(entries))
        for index, chunk in enumerate(cut)
    ]


def page_at(entries: Sequence[Coming], per_page: int, number: int) -> Page:
    """Page ``number`` of the list as it is now; the last one if the list shrank below it."""
    found = pages(entries, per_page)
    return found[min(max(number, 0), len(found) - 1)]


def page_embed(page: Page, *, mine: bool, note: str | None = None) -> discord.Embed:
    head = MINE_HEAD if mine else UPCOMING_HEAD
    empty = NOTHING_MINE if mine else NOTHING_COMING
    # What a Leave answered goes first, so the member reads it where they pressed.
    top = [f"**{clip(note, NOTE_MAX)}**"] if note else []
    text = "\n".join([*top, head, "", *(page.lines or [empty])])
    embed = discord.Embed(
        title=MINE_TITLE if mine else UPCOMING_TITLE,
        description=clip(text, limits.EMBED_DESCRIPTION_MAX),
        colour=MINE_COLOUR if mine else UPCOMING_COLOUR,
    )
    what = "sign-up" if mine else "event"
    counted = f"{page.total} {what}{'s' if page.total != 1 else ''}"
    if page.count > 1:
        embed.set_footer(text=f"Page {page.number + 1} of {page.count} · {counted}")
    elif page.total:
        embed.set_footer(text=counted)
    return embed


def leave_label(number: int, entry: Coming) -> str:
    return clip(f"Leave {number}: {entry.title}", 80)
