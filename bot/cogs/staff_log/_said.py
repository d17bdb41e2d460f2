"""The staff log's words for sign-ups (a promotion, a late cancel, staff's changes) and for a
cancel's cleanup; ``bot.cogs.staff_log._lines`` picks which to say."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.rendering import clip, person
from runner import history
from runner.definitions import shown_duration
from runner.states import CleanupStatus, SignupStatus, StaffSignupChange


def after_attempts(count: int | None) -> str:
    return f" after {count} attempts" if count and count > 1 else ""


@dataclass(frozen=True)
class Said:
    """What ``_words`` found to say: the icon, the line after the run's name, the summary's
    phrase, and whether the line points at the message its own step posted."""

    icon: str
    text: str
    group: str | None = None
    step_link: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def cleanup_words(
    event: history.CleanupStarted | history.UndoRan | history.UndoFailed | history.CleanupFinished,
) -> Said:
    """A cancel's cleanup: what it undoes, each undo, and how it ended."""
    match event:
        case history.CleanupStarted(undos=undos, manual=manual):
            by_hand = f"; {manual} to undo by hand (/event status lists them)" if manual else ""
            return Said(
                "🧹",
                f": cleanup started, {undos} action(s) to undo, latest first{by_hand}",
                "cleanup started",
            )
        case history.UndoRan(label=label, attempts=attempts):
            return Said("↩️", f": undone: {clip(label, 200)}{after_attempts(attempts)}", "undid an action")
        case history.UndoFailed(label=label, error=error, attempts=attempts):
            said = f"could not undo {clip(label, 200)}{after_attempts(attempts)}: {clip(error, 300)}"
            return Said("❌", f": {said}", "could not undo an action")
        case history.CleanupFinished(status=status):
            verdict = (
                "complete: everything it recorded is undone"
                if status is CleanupStatus.DONE
                else "finished with actions not undone (/event status lists them)"
            )
            return Said("🧹", f": cleanup {verdict}", f"cleanup {verdict}")


# Steps done that staff are told of, with what the game answered (``game_words``).
GAME_ACTIONS = ("rcon.command",)


def _one_line(text: str, size: int) -> str:
    """A game's words on one staff-log line (lines are packed and split by line breaks)."""
    return clip(" ".join(text.split()).replace("`", "'"), size)


def game_words(result: dict[str, Any] | None, step: str) -> Said | None:
    """A command a step sent to a game server, and the server's reply (``actions.rcon``)."""
    if not isinstance(result, dict):
        return None
    server, command = str(result.get("server") or ""), _one_line(str(result.get("command") or ""), 200)
    if "would_send" in result:
        where = str(result["would_send"])
        return Said(
            "🎮", f": {step} would have sent `{command}` to rcon {where}", f"would send to rcon {where}"
        )
    if not server:
        return None
    reply = _one_line(str(result.get("reply") or ""), 300)
    answered = f"it answered “{reply}”" if reply else "it answered nothing"
    return Said(
        "🎮", f": {step} sent `{command}` to rcon {server}; {answered}", f"sent a command to rcon {server}"
    )


def staff_signup_words(event: history.SignupChangedByStaff, actor: str) -> Said:
    """Staff added, moved or removed a member (``/event signups``)."""
    who = person(history.Actor(event.member_id, event.member_name))
    where = event.option if event.status != SignupStatus.WAITLISTED else f"the {event.option} waiting list"
    match event.change:
        case StaffSignupChange.ADDED:
            return Said("➕", f": {who} added to {where} by {actor}", f"had members added by {actor}")
        case StaffSignupChange.MOVED:
            return Said(
                "↔️",
                f": {who} moved from {event.from_option} to {where} by {actor}",
                f"had members moved by {actor}",
            )
    return Said("➖", f": {who} removed from {event.option} by {actor}", f"had members removed by {actor}")


def signup_words(event: history.SignupPromoted | history.SignupLateCancel) -> Said:
    """Sign-ups: a promotion from the waiting list, a confirmed member leaving late."""
    who = person(history.Actor(event.member_id, event.member_name))
    if isinstance(event, history.SignupPromoted):
        left = (
            f" when {person(history.Actor(event.left_id, event.left_name or ''))} left"
            if event.left_id
            else ""
        )
        return Said(
            "⬆️",
            f": {who} got a {event.option} seat from the waiting list{left}",
            "promoted from a waiting list",
        )
    when = (
        f"{shown_duration(event.before_start)} before the start"
        if event.before_start > 0
        else "after the start"
    )
    return Said("⚠️", f": late cancel, {who} ({event.option}) left {when}", "had a late cancel")
