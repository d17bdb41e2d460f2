"""What the sign-up lists answer: a join, a leave or an import (``runner.signups`` decides), and
the list as it stands. Plain values; a front end words them.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field

from runner.definitions import SignupDefinition
from runner.states import RUN_TERMINAL, RunStatus, SignupOverride, SignupStatus


class RefusedWhy(enum.StrEnum):
    CLOSED = "closed"
    NOT_ALLOWED_ROLE = "not_allowed_role"
    NO_SUCH_OPTION = "no_such_option"
    RUN_OVER = "run_over"
    # The run does not exist, or its event has no ``signup:``.
    NO_SIGNUP = "no_signup"


@dataclass(frozen=True)
class Confirmed:
    option: str
    position: int


@dataclass(frozen=True)
class Waitlisted:
    option: str
    # Where they stand in the option's waiting list (1: next).
    place: int
    position: int
    event_full: bool = False  # the option had room but the run's overall capacity had none


@dataclass(frozen=True)
class AlreadyIn:
    option: str
    status: SignupStatus
    place: int | None = None


@dataclass(frozen=True)
class Moved:
    """Signed up in another option than before: the new option's answer, and whom the seat they
    gave up went to."""

    from_option: str
    now: Confirmed | Waitlisted
    promoted: Promotion | None = None


@dataclass(frozen=True)
class Refused:
    why: RefusedWhy
    # For ``not_allowed_role``: the roles that may sign up; ``no_such_option``: the options.
    needed: tuple[str, ...] = ()
    closes_at: dt.datetime | None = None


JoinAnswer = Confirmed | Waitlisted | AlreadyIn | Moved | Refused


@dataclass(frozen=True)
class AlreadyKnown:
    """The member signed up before (they may have left since) or was imported before: an
    import leaves them as they are."""


ImportAnswer = Confirmed | Waitlisted | AlreadyKnown | Refused


@dataclass(frozen=True)
class Promotion:
    member_id: str
    member_name: str
    option: str


@dataclass(frozen=True)
class Left:
    option: str
    was: SignupStatus
    promoted: Promotion | None = None
    # Left less than the sign-up's ``late_cancel`` before the start (flagged in the staff log).
    late: bool = False


@dataclass(frozen=True)
class NotSignedUp:
    pass


LeaveAnswer = Left | NotSignedUp | Refused


@dataclass(frozen=True)
class Signup:
    member_id: str
    member_name: str
    option: str
    status: SignupStatus
    position: int
    joined_at: dt.datetime


@dataclass(frozen=True)
class OptionList:
    name: str
    capacity: int | None
    confirmed: list[Signup] = field(default_factory=list)
    waitlisted: list[Signup] = field(default_factory=list)


@dataclass(frozen=True)
class SignupList:
    run_id: int
    definition: SignupDefinition
    options: list[OptionList]
    starts_at: dt.datetime
    # ``None``: open until the run ends (``closes: end``).
    closes_at: dt.datetime | None
    run_status: RunStatus

    @property
    def confirmed(self) -> list[Signup]:
        return sorted((s for o in self.options for s in o.confirmed), key=lambda s: s.position)

    @property
    def waitlisted(self) -> list[Signup]:
        return sorted((s for o in self.options for s in o.waitlisted), key=lambda s: s.position)

    # Staff closed or reopened them by hand (``None``: the definition's schedule decides).
    override: SignupOverride | None = None

    def is_closed(self, now: dt.datetime) -> bool:
        return closed(self.run_status, self.closes_at, now, self.override)


def closed(
    status: RunStatus, closes_at: dt.datetime | None, now: dt.datetime, override: SignupOverride | None = None
) -> bool:
    """Sign-ups take no one new: the run is over, staff closed them, or past the closing time (or
    started) unless staff reopened them (then open until the run ends)."""
    if status in RUN_TERMINAL:
        return True
    if override is not None:
        return override == SignupOverride.CLOSED
    if closes_at is None:
        return status in RUN_TERMINAL
    # Past the start (a run started early by hand, too) nobody new signs up.
    return status != RunStatus.SCHEDULED or now >= closes_at
