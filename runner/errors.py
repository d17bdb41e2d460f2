"""Errors the runner raises on purpose.

``UserFacingError`` and its children carry a message written for a moderator or an author: the
front ends show it as it is. Anything else reaching a front end is a bug and gets logged with a
traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class UserFacingError(Exception):
    """Something went wrong that the person who asked can act on."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__ or "")

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a definition, and where: file, phase key, step index, field."""

    message: str
    file: str | None = None
    phase: str | None = None
    step: int | None = None
    field: str | None = None

    def where(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.phase is not None:
            parts.append(f"phase {self.phase!r}")
        if self.step is not None:
            # Its place in the file, as an ordinal: before publishing a step has no id, and
            # "step 0" would read as the step numbered 0 wherever steps are named by id.
            parts.append(f"{ordinal(self.step + 1)} step")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts) or "definition"

    def __str__(self) -> str:
        return f"{self.where()}: {self.message}"


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"


class DefinitionError(UserFacingError):
    """The event definition is not valid."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class RegistrationError(Exception):
    """An action module tried to register something malformed (a programming error)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class UnknownDefinition(UserFacingError):
    """There is no published event with that key."""


class UnreadableDefinition(UserFacingError):
    """A stored definition version that this version of the runner cannot read.

    Versions are validated when they are published, so this means the row was written under
    older rules or edited by hand. Whoever meets it shows it as unreadable, with the reason, and
    carries on with everything else."""

    def __init__(self, version_id: int, reason: str, *, key: str | None = None, version: int | None = None):
        self.version_id = version_id
        self.reason = reason
        self.key = key
        self.version = version
        which = f"version {version}" if version is not None else f"version id {version_id}"
        name = f"{key!r} " if key else ""
        super().__init__(f"the stored definition {name}{which} cannot be read: {reason}")
