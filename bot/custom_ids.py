"""Every custom id the bot puts on a component, built and read back here and nowhere else.

A button's whole state is its custom id: a press after a restart, or in another process, is
rebuilt from it alone (discord.py's ``DynamicItem``, whose ``template`` is one of the patterns
below). Each kind is a frozen dataclass: ``custom_id`` builds the id, ``TEMPLATE`` is the
pattern a press is matched with, ``from_match`` reads a match back, and ``parse`` reads any id
the bot made (``None`` for one it did not). Discord allows 100 characters; the longest here (a
start with a 64-character key) is well under.

* ``cue:<step_id>:<confirm|skip>``: a GM cue's Confirm and Skip (``bot.cogs.cues._cog``).
* ``evstart:<key>:<version id>:<scope index|*>:<l|r>``: "Start anyway" (or "Rehearse anyway")
  under a preflight's problems, pinned to the version checked (``bot.cogs.control._cog``).
* ``evpub:<token>:<publish|cancel>``: the buttons of a ``/event publish`` preview, naming the
  draft this process holds (``bot.cogs.publishing._flow``, ``bot.cogs.publishing._drafts``).
* ``evform:c:<template>`` and ``evform:e:<key>:<version id>``: the form (modal) of ``/event
  create`` from a template and of ``/event edit`` of the version it was opened on
  (``bot.cogs.authoring._cog``); a submit is read back from it alone, in whichever process.
* ``signup:<run_id>:<option|~leave>``: a sign-up message's option buttons and its Leave
  (``bot.cogs.signups._cog``); an option's name is a key, which never holds ``~``.
* ``evatt:<run_id>:<page>`` and ``evattp:<run_id>:<page>``: an attendance page's select menu
  (who came) and a button that shows that page (``bot.cogs.attendance._cog``).
* ``evsu:<run_id>:<close|reopen|export>``: the buttons under the staff's sign-up list
  (``/event signups list``, ``bot.cogs.signups._staff``).
* ``evpage:<u|m>:<page>``: Previous and Next under ``/events upcoming`` (``u``) and ``/events
  mine`` (``m``), naming the page they open; the list is read again at the press
  (``bot.cogs.players._cog``).
* ``evleave:<run_id>:<page>``: a Leave under ``/events mine``, for the member who pressed it,
  and the page to show again after it.
* ``evappr:<step_id>:<approve|skip>``: Approve and Skip on a step waiting for staff because of
  its action's risk (``bot.cogs.approvals._cog``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from runner.states import Control

# The controls a cue's buttons press (``runner.controls.CUE_VERBS``).
CueVerb = Literal[Control.CONFIRM, Control.SKIP]
# The controls an approval request's buttons press.
ApprovalVerb = Literal[Control.APPROVE, Control.SKIP]
StartMode = Literal["l", "r"]
PublishVerb = Literal["publish", "cancel"]
# Which ``/events`` list a page belongs to: ``u`` upcoming, ``m`` mine.
EventsList = Literal["u", "m"]
# The scope token of a start of every scope (otherwise the scope's index in the definition).
ALL_SCOPES = "*"


@dataclass(frozen=True)
class CuePress:
    step_id: int
    verb: CueVerb

    TEMPLATE: ClassVar[str] = r"cue:(?P<step_id>[0-9]+):(?P<verb>confirm|skip)"

    @property
    def custom_id(self) -> str:
        return f"cue:{self.step_id}:{self.verb}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> CuePress:
        verb: CueVerb = Control.CONFIRM if match["verb"] == Control.CONFIRM else Control.SKIP
        return cls(int(match["step_id"]), verb)


@dataclass(frozen=True)
class ApprovalPress:
    step_id: int
    verb: ApprovalVerb

    TEMPLATE: ClassVar[str] = r"evappr:(?P<step_id>[0-9]{1,19}):(?P<verb>approve|skip)"

    @property
    def custom_id(self) -> str:
        return f"evappr:{self.step_id}:{self.verb}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> ApprovalPress:
        verb: ApprovalVerb = Control.APPROVE if match["verb"] == Control.APPROVE else Control.SKIP
        return cls(int(match["step_id"]), verb)


@dataclass(frozen=True)
class StartAnywayPress:
    key: str
    version_id: int
    scope_token: str
    mode: StartMode

    TEMPLATE: ClassVar[str] = (
        r"evstart:(?P<key>[a-z0-9][a-z0-9_-]{0,63}):(?P<version>[0-9]+):(?P<scope>[0-9]+|\*):(?P<mode>[lr])"
    )

    @property
    def rehearsal(self) -> bool:
        return self.mode == "r"

    @property
    def custom_id(self) -> str:
        return f"evstart:{self.key}:{self.version_id}:{self.scope_token}:{self.mode}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> StartAnywayPress:
        mode: StartMode = "r" if match["mode"] == "r" else "l"
        return cls(match["key"], int(match["version"]), match["scope"], mode)


@dataclass(frozen=True)
class PublishPress:
    token: str
    verb: PublishVerb

    TEMPLATE: ClassVar[str] = r"evpub:(?P<token>[0-9a-f]{16}):(?P<verb>publish|cancel)"

    @property
    def custom_id(self) -> str:
        return f"evpub:{self.token}:{self.verb}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> PublishPress:
        verb: PublishVerb = "publish" if match["verb"] == "publish" else "cancel"
        return cls(match["token"], verb)


@dataclass(frozen=True)
class SignupPress:
    run_id: int
    # An option's name, or ``LEAVE``.
    choice: str

    LEAVE: ClassVar[str] = "~leave"
    TEMPLATE: ClassVar[str] = r"signup:(?P<run_id>[0-9]{1,19}):(?P<choice>[a-z0-9][a-z0-9_-]{0,31}|~leave)"

    @property
    def leave(self) -> bool:
        return self.choice == self.LEAVE

    @property
    def custom_id(self) -> str:
        return f"signup:{self.run_id}:{self.choice}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> SignupPress:
        return cls(int(match["run_id"]), match["choice"])


StaffSignupVerb = Literal["close", "reopen", "export"]


@dataclass(frozen=True)
class StaffSignupPress:
    run_id: int
    verb: StaffSignupVerb

    TEMPLATE: ClassVar[str] = r"evsu:(?P<run_id>[0-9]{1,19}):(?P<verb>close|reopen|export)"

    @property
    def custom_id(self) -> str:
        return f"evsu:{self.run_id}:{self.verb}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> StaffSignupPress:
        verbs: dict[str, StaffSignupVerb] = {"close": "close", "reopen": "reopen", "export": "export"}
        return cls(int(match["run_id"]), verbs[match["verb"]])


@dataclass(frozen=True)
class AttendancePick:
    """The select menu of one page of a run's seated members: who came."""

    run_id: int
    page: int

    TEMPLATE: ClassVar[str] = r"evatt:(?P<run_id>[0-9]{1,19}):(?P<page>[0-9]{1,4})"

    @property
    def custom_id(self) -> str:
        return f"evatt:{self.run_id}:{self.page}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> AttendancePick:
        return cls(int(match["run_id"]), int(match["page"]))


@dataclass(frozen=True)
class AttendancePage:
    """A button that shows one page of a run's attendance (the cue's "Take attendance", and
    Previous / Next)."""

    run_id: int
    page: int

    TEMPLATE: ClassVar[str] = r"evattp:(?P<run_id>[0-9]{1,19}):(?P<page>[0-9]{1,4})"

    @property
    def custom_id(self) -> str:
        return f"evattp:{self.run_id}:{self.page}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> AttendancePage:
        return cls(int(match["run_id"]), int(match["page"]))


@dataclass(frozen=True)
class EventForm:
    """The form ``/event create`` (``template``) or ``/event edit`` (``key`` at ``version_id``)
    opened."""

    template: str | None = None
    key: str | None = None
    version_id: int | None = None

    TEMPLATE: ClassVar[str] = (
        r"evform:(?:c:(?P<template>[a-z0-9][a-z0-9_-]{0,63})"
        r"|e:(?P<key>[a-z0-9][a-z0-9_-]{0,63}):(?P<version>[0-9]{1,19}))"
    )

    @property
    def custom_id(self) -> str:
        if self.template is not None:
            return f"evform:c:{self.template}"
        return f"evform:e:{self.key}:{self.version_id}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> EventForm:
        if match["template"] is not None:
            return cls(template=match["template"])
        return cls(key=match["key"], version_id=int(match["version"]))


@dataclass(frozen=True)
class EventsPage:
    """Previous or Next under an ``/events`` list: the list and the page the press opens."""

    listing: EventsList
    page: int

    TEMPLATE: ClassVar[str] = r"evpage:(?P<listing>[um]):(?P<page>[0-9]{1,4})"

    @property
    def custom_id(self) -> str:
        return f"evpage:{self.listing}:{self.page}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> EventsPage:
        listing: EventsList = "m" if match["listing"] == "m" else "u"
        return cls(listing, int(match["page"]))


@dataclass(frozen=True)
class EventsLeave:
    """Leave under ``/events mine``: the run to leave (the presser's own sign-up, whoever they
    are, so the id grants nothing) and the page shown again after."""

    run_id: int
    page: int

    TEMPLATE: ClassVar[str] = r"evleave:(?P<run_id>[0-9]{1,19}):(?P<page>[0-9]{1,4})"

    @property
    def custom_id(self) -> str:
        return f"evleave:{self.run_id}:{self.page}"

    @classmethod
    def from_match(cls, match: re.Match[str]) -> EventsLeave:
        return cls(int(match["run_id"]), int(match["page"]))


Press = (
    CuePress
    | StartAnywayPress
    | PublishPress
    | SignupPress
    | StaffSignupPress
    | AttendancePick
    | AttendancePage
    | EventForm
    | EventsPage
    | EventsLeave
    | ApprovalPress
)
KINDS: tuple[
    type[CuePress]
    | type[StartAnywayPress]
    | type[PublishPress]
    | type[SignupPress]
    | type[StaffSignupPress]
    | type[AttendancePick]
    | type[AttendancePage]
    | type[EventForm]
    | type[EventsPage]
    | type[EventsLeave]
    | type[ApprovalPress],
    ...,
] = (
    CuePress,
    ApprovalPress,
    StartAnywayPress,
    PublishPress,
    SignupPress,
    StaffSignupPress,
    AttendancePick,
    AttendancePage,
    EventForm,
    EventsPage,
    EventsLeave,
)


def parse(custom_id: str | None) -> Press | None:
    """What a custom id the bot made says; ``None`` for any other (or none)."""
    for kind in KINDS:
        match = re.fullmatch(kind.TEMPLATE, custom_id or "")
        if match is not None:
            return kind.from_match(match)
    return None
