"""Rehearsing sign-ups (``rehearse --signups 12`` or ``--signups tank,tank,dps``, issue 28 item 8).

The run is booked for its start, as the schedule books a live one, and its sign-up message is
shown at the moment it would be posted (``signup.opens`` before the start, or when the run is
booked, a day ahead). Simulated members then click, one choice each, through the same sign-up
desk as Discord's buttons: the seats, the waiting lists and the event's capacity are the
database's answers. If anyone waits, the first seated member leaves, so a promotion and the
direct message it sends are shown. After the run, attendance is taken as a GM would: everyone
seated came but the last, who is marked a no-show.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from actions.delivery import SignupPost
from runner import attendance, catalog, signups, views
from runner.definitions import EventDefinition, shown_duration
from runner.history import Actor
from runner.signups import AlreadyIn, Confirmed, Left, Moved, Refused, Waitlisted
from runner.states import Attendance

if TYPE_CHECKING:
    from rehearsal.session import Rehearsal

# When a run without ``signup.opens`` is booked, and so its message posted: the tick's look-ahead.
BOOKED_AHEAD = dt.timedelta(hours=24)
# Simulated members' ids: snowflake-shaped, far from any real member's.
MEMBER_ID_BASE = 990_000_000_000_000_000
ACTOR = Actor(None, "rehearsal")


class SignupsRefused(ValueError):
    """``--signups`` cannot be rehearsed for this event; the message says why."""


def simulated_choices(text: str, definition: EventDefinition) -> list[str]:
    """What each simulated member clicks: ``12`` fills the options in turn (``tank, healer, dps,
    tank, ...``); ``tank,tank,dps`` names them."""
    signup = definition.signup
    if signup is None:
        raise SignupsRefused(f"--signups: {definition.key} has no signup: to rehearse")
    options = list(signup.options)
    if text.strip().isdigit():
        count = int(text)
        if not 1 <= count <= 500:
            raise SignupsRefused(f"--signups {text}: between 1 and 500 members")
        return [options[n % len(options)] for n in range(count)]
    choices = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted({c for c in choices if c not in options})
    if unknown or not choices:
        raise SignupsRefused(
            f"--signups: {', '.join(unknown) or 'nothing'} is not an option of {definition.key} "
            f"(its options: {', '.join(options)}); give a number of members or options separated by commas"
        )
    return choices


def opening_lead(definition: EventDefinition) -> dt.timedelta:
    """How long before the start the sign-up message goes up."""
    signup = definition.signup
    if signup is not None and signup.opens is not None:
        return dt.timedelta(seconds=signup.opens)
    return BOOKED_AHEAD


def member(n: int) -> tuple[str, str]:
    return str(MEMBER_ID_BASE + n), f"member{n:02d}"


def _said(answer: object, option: str) -> str:
    match answer:
        case Confirmed():
            return f"clicked {option}: a seat"
        case Waitlisted(place=place, event_full=True):
            return f"clicked {option}: the event is full, #{place} on the {option} waiting list"
        case Waitlisted(place=place):
            return f"clicked {option}: {option} is full, #{place} on its waiting list"
        case AlreadyIn() | Moved():
            return f"clicked {option} again: no change"
        case Refused(why=why):
            return f"clicked {option}: refused ({why.value})"
    return f"clicked {option}: {answer!r}"


async def book_and_click(rehearsal: Rehearsal, starts_at: dt.datetime, choices: list[str]) -> list[int]:
    """Book a run per scope for ``starts_at``, show the sign-up message when it would be posted,
    let the simulated members click, and one leave; the runs' ids."""
    definition = rehearsal.definition
    assert definition is not None and definition.signup is not None
    services, console = rehearsal.services, rehearsal.console
    delivery = services.delivery
    scopes = definition.run_scopes() if rehearsal.options.scope is None else [rehearsal.options.scope]
    async with services.engine.begin() as conn:
        current = await catalog.current(conn, definition.key, catalog.VersionCache())
        booked = [
            await catalog.create_run(
                conn, current, scope, starts_at, rehearsal.clock.now(), actor=ACTOR, rehearsal=True
            )
            for scope in scopes
        ]
    booked_scopes = [
        (run_id, scope) for run_id, scope in zip(booked, scopes, strict=True) if run_id is not None
    ]
    run_ids = [run_id for run_id, _ in booked_scopes]
    roles = tuple(definition.signup.roles or ())
    delivery.member_names.update(dict(member(n) for n in range(1, len(choices) + 1)))
    for run_id, scope in booked_scopes:
        context = views.StepContext(
            event_key=definition.key,
            event_title=definition.title,
            phase_key="signup",
            phase_label="Sign-ups",
            step_index=0,
            step_label="Sign-ups",
            scope=scope,
            rehearsal=True,
            starts_at=starts_at,
        )
        listed = await signups.listing(services.engine, run_id)
        assert listed is not None, "the run was booked for an event with a sign-up"
        channel = definition.signup.channel or "(the channel of its discord.signup step)"
        lead = opening_lead(definition)
        console.note(f"run {run_id}: sign-ups open {shown_duration(lead.total_seconds())} before the start:")
        if definition.signup.channel:
            await delivery.post_signup(SignupPost(channel, None, listed, run_id, 0, context))
            console.release(0)
        await _click(rehearsal, run_id, choices, roles)
        listed = await signups.listing(services.engine, run_id)
        assert listed is not None
        console.emit(
            "signup",
            f"run {run_id}: the sign-up message now",
            *delivery.signup_lines(listed, definition.title),
        )
        console.note("")
    return run_ids


async def _click(rehearsal: Rehearsal, run_id: int, choices: list[str], roles: tuple[str, ...]) -> None:
    desk, console, now = rehearsal.services.signups, rehearsal.console, rehearsal.clock.now()
    for n, option in enumerate(choices, 1):
        member_id, name = member(n)
        # Each holds the roles the sign-up asks for: a rehearsal shows seats, not refusals.
        answer = await desk.join(run_id, member_id, name, option, roles, now)
        console.emit("signup", f"run {run_id}: @{name} {_said(answer, option)}", run_id=run_id, member=name)
    listed = await signups.listing(rehearsal.services.engine, run_id)
    if listed is None or not listed.waitlisted:
        return
    # Someone waits: the first seated member leaves, and the seat goes to the first waiting for it.
    leaving = listed.confirmed[0]
    left = await desk.leave(run_id, leaving.member_id, leaving.member_name, now)
    said = f"run {run_id}: @{leaving.member_name} left {leaving.option}"
    if isinstance(left, Left) and left.promoted is not None:
        promoted = left.promoted
        title = rehearsal.definition.title if rehearsal.definition else "the event"
        dm = f"🎉 A seat freed up: you are now signed up for {title} ({promoted.option})."
        console.emit(
            "signup",
            f"{said}: @{promoted.member_name} gets the seat",
            f"direct message to @{promoted.member_name}: {dm}",
        )
        return
    console.emit("signup", f"{said}: nobody waiting for that seat")


async def take_attendance(rehearsal: Rehearsal) -> None:
    """After the run, as a GM would at a cue with ``attendance: true``: everyone seated came but
    the last, who is marked a no-show."""
    services, console = rehearsal.services, rehearsal.console
    for run_id in rehearsal.run_ids:
        page = await attendance.page_of(services.engine, run_id, 0)
        if page is None or not page.members:
            continue
        for number in range(page.pages):
            shown = page if number == 0 else await attendance.page_of(services.engine, run_id, number)
            assert shown is not None
            came = {s.member_id for s in shown.members}
            if number == page.pages - 1:
                came.discard(shown.members[-1].member_id)
            await attendance.mark_page(services.engine, run_id, number, came, ACTOR, rehearsal.clock.now())
        marks = await attendance.marks_of(services.engine, run_id)
        no_shows = [
            rehearsal.services.delivery.member_names.get(m, m)
            for m, s in marks.items()
            if s == Attendance.NO_SHOW
        ]
        attended = sum(1 for s in marks.values() if s == Attendance.ATTENDED)
        console.emit(
            "attendance",
            f"run {run_id}: attendance taken: {attended} came, no-show: {', '.join('@' + n for n in no_shows) or 'nobody'}",
            run_id=run_id,
        )
