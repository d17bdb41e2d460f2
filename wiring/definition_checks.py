"""A definition checked completely: the one check ``python -m bot validate`` / ``publish`` run on
files and ``/event validate`` / ``/event publish`` run on an attachment, so what passes on the
command line passes in Discord, and the other way round.

Completely means: read as UTF-8 YAML (``runner.definitions.parse_yaml``) and validated (the
schema and every step's params, ``runner.definitions.validate``); then, with a config that names
a server's channels or roles, every alias each valid definition names, against that config
(``check_aliases``); and, across files checked together, no key used twice (``check_keys``).
Nothing here imports discord.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actions import build_registry
from runner import schedule
from runner.definitions import EventDefinition, ManualSchedule, read_file, validate
from runner.definitions.sizes import within_limits
from runner.errors import DefinitionError, Problem
from runner.preflight import preflight
from runner.registry import ActionRegistry
from runner.suggestions import did_you_mean
from wiring.aliases import AliasCheckDelivery, located
from wiring.config import Config
from wiring.signup_checks import signup_role_problems


@dataclass
class CheckedFile:
    path: Path
    definition: EventDefinition | None
    problems: list[Problem] = field(default_factory=list)
    # What was read, when it did not validate: its aliases are still checked, so one run of
    # validate reports a schema problem and an alias typo together (its lists cut to their
    # limits, as validation looked at them).
    raw: Any = None

    @property
    def valid(self) -> bool:
        return self.definition is not None and not self.problems


def check_file(path: Path, registry: ActionRegistry) -> CheckedFile:
    """A file on disk, read and validated."""
    try:
        raw = read_file(path)
    except DefinitionError as exc:
        return CheckedFile(path, None, list(exc.problems))
    try:
        return CheckedFile(path, validate(raw, registry, file=str(path)))
    except DefinitionError as exc:
        return CheckedFile(path, None, list(exc.problems), raw=within_limits(raw))


def check_parsed(
    name: str, raw: Any, registry: ActionRegistry, *, now: dt.datetime | None = None
) -> CheckedFile:
    """Data already read from a file's YAML (an upload: the front end reads it, to refuse what
    cannot be read in its own words) validated exactly as ``check_file`` validates a file on
    disk; ``name`` stands where the path would. ``now`` (naive UTC) decides whether a ``once``
    is still to come; the wall clock when not given, as on the command line."""
    path = Path(name)
    try:
        return CheckedFile(path, validate(raw, registry, file=str(path), now=now))
    except DefinitionError as exc:
        return CheckedFile(path, None, list(exc.problems), raw=within_limits(raw))


# A reminder's preflight problem names the reminder; its alias words are about its own fields.
REMINDER = re.compile(r"reminders\.[0-9]+")


def checks_aliases(config: Config | None) -> bool:
    """Whether ``config`` names anything a definition's aliases could be checked against."""
    return config is not None and bool(config.channels or config.roles)


class _EverySecretSet(Mapping[str, str]):
    """The environment as a definition's check sees it. A game target's secret belongs to the
    machine the bot runs on, not to the definition: ``validate`` on an author's laptop checks that
    each target alias exists, and the preflight before a start checks the secret itself."""

    def __getitem__(self, name: str) -> str:
        return "set"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


async def check_aliases(checked: Sequence[CheckedFile], config: Config) -> None:
    """Every channel, ``gm_channel``, ping role and game target the valid definitions name, in their steps
    and their reminders, against the config. It is the preflight the bot runs before a start
    (``runner.preflight``: one walk of both), with the config's aliases (``wiring.aliases``) in
    Discord's place: the rehearsal's delivery refuses by the same rule when the step or the
    reminder is sent, so what passes here is what a rehearsal (and the bot) will post."""

    async def no_context(run_id: int, step_id: int) -> None:
        return None

    # The game targets too: a ``webhook.post`` or ``rcon.command`` naming an alias the config
    # lacks is refused here, one the config has is not (it was refused whatever it named).
    registry = build_registry(
        AliasCheckDelivery(config),
        no_context,
        webhooks=config.webhooks,
        rcon=config.rcon,
        secrets=_EverySecretSet(),
    )
    for item in checked:
        item.problems[:] = [_with_role_aliases(p, config) for p in item.problems]
        if item.definition is None:
            item.problems.extend(_raw_alias_problems(item, config))
            continue
        found = await preflight(registry, item.definition, scope=item.definition.run_scopes()[0])
        item.problems.extend(
            Problem(message, file=str(item.path), phase=p.phase, step=p.step, field=field)
            for p in found
            for field, message in _located(p)
        )
        item.problems.extend(signup_role_problems(item.definition, config, str(item.path)))


def _located(problem: Problem) -> list[tuple[str | None, str]]:
    """A preflight problem's alias words at the field they are about: a step's params
    (``params.channel``), or a reminder's own flat fields (``reminders.0.channel``)."""
    if problem.field is None:
        return located(problem.message)
    if REMINDER.fullmatch(problem.field):
        return [
            (f"{problem.field}.{field.removeprefix('params.')}" if field else problem.field, message)
            for field, message in located(problem.message)
        ]
    return [(problem.field, problem.message)]


def _with_role_aliases(problem: Problem, config: Config) -> Problem:
    """A role given by its name (``'@Quiz Fans' is not a role alias``) gets the config's role
    aliases listed, and the one its name looks like."""
    if " is not a role alias " not in problem.message or not config.roles:
        return problem
    written = problem.message.split("'")[1] if problem.message.count("'") >= 2 else ""
    looks_like = "-".join(written.strip("@<>&").lower().split())
    known = ", ".join(sorted(config.roles))
    hint = (
        f"; did you mean {looks_like!r}?"
        if looks_like in config.roles
        else did_you_mean(looks_like, config.roles)
    )
    return dataclasses.replace(
        problem, message=f"{problem.message}; the config's role aliases: {known}{hint}"
    )


def _raw_alias_problems(item: CheckedFile, config: Config) -> list[Problem]:
    """The channels and ping roles a definition that did not validate names in its steps'
    params, its reminders and its sign-up, against the config: the typo is reported in the same
    run as the schema problem (a part the schema already found wrong is left out)."""
    raw = item.raw if isinstance(item.raw, dict) else {}
    file = str(item.path)
    said = {(p.phase, p.step) for p in item.problems if p.field and p.field.startswith("params")}
    fields = [p.field or "" for p in item.problems if p.phase is None]
    found: list[Problem] = []
    phases = raw.get("phases")
    for number, phase in enumerate(phases if isinstance(phases, list) else []):
        steps = phase.get("steps") if isinstance(phase, dict) else None
        # Named as the schema's problems name a phase (its key, else its place), so a step they
        # reported is matched, and a key that is a list or a mapping is never hashed.
        key = phase.get("key") if isinstance(phase, dict) else None
        key = key if isinstance(key, str) and key else f"#{number}"
        for index, step in enumerate(steps if isinstance(steps, list) else []):
            params = step.get("params") if isinstance(step, dict) else None
            if (key, index) not in said:
                found += [
                    Problem(message, file=file, phase=key, step=index, field=field)
                    for field, message in _alias_typos(params, config, "params.")
                ]
    reminders = raw.get("reminders")
    for index, reminder in enumerate(reminders if isinstance(reminders, list) else []):
        where = f"reminders.{index}"
        if not any(f == where or f.startswith(where + ".") for f in fields):
            # Named flat, as validate names a reminder's fields, however it was written.
            params = reminder.get("params", reminder) if isinstance(reminder, dict) else None
            typos = _alias_typos(params, config, where + ".")
            found += [Problem(message, file=file, field=field) for field, message in typos]
    signup = raw.get("signup")
    if isinstance(signup, dict) and not any(f.startswith("signup.channel") for f in fields):
        typos = _alias_typos({"channel": signup.get("channel")}, config, "signup.")
        found += [Problem(message, file=file, field=field) for field, message in typos]
    return found


def _alias_typos(params: Any, config: Config, prefix: str) -> list[tuple[str, str]]:
    """(field, problem) for a ``channel`` or ``ping_role`` in ``params`` the config lacks."""
    if not isinstance(params, dict):
        return []
    found = []
    for name, known, what in (
        (params.get("channel"), config.channels, "channel"),
        (params.get("ping_role"), config.roles, "ping role"),
    ):
        alias = name.removeprefix("#") if isinstance(name, str) else None
        if alias and known and not alias.isdigit() and alias not in known:
            kind = what.split()[-1]
            message = (
                f"{what} {alias!r} is not one of the {kind} aliases in config "
                f"({kind}s: {', '.join(sorted(known))}){did_you_mean(alias, known)}"
            )
            found.append((prefix + what.replace(" ", "_"), message))
    return found


def check_keys(checked: Sequence[CheckedFile]) -> None:
    """No two files checked together use one key: publishing both would make the second
    silently replace the first."""
    by_key: dict[str, list[CheckedFile]] = defaultdict(list)
    for item in checked:
        if item.definition is not None:
            by_key[item.definition.key].append(item)
    for key, items in by_key.items():
        for item in items if len(items) > 1 else ():
            others = ", ".join(str(other.path) for other in items if other is not item)
            item.problems.append(
                Problem(f"key {key!r} is also used by {others}", file=str(item.path), field="key")
            )


NEXT_SHOWN = 3


def warnings(definition: EventDefinition) -> list[str]:
    """What is allowed but probably not meant, shown beside a valid definition (never refused)."""
    note = definition.signup.overbooked() if definition.signup is not None else None
    return [note] if note else []


def next_lines(definition: EventDefinition, now: dt.datetime) -> list[str]:
    """A scheduled event's next occurrences, each in its own zone and in UTC (none for a manual
    event): what its schedule really means, before it is published."""
    zone = schedule.zone_of(definition)
    moments = schedule.next_occurrences(definition, now, NEXT_SHOWN)
    if isinstance(definition.schedule, ManualSchedule):
        return []
    if not moments:
        return ["next: none (the schedule has no more occurrences)"]
    shown = [schedule.shown(moment, zone) for moment in moments]
    return [f"next: {shown[0]}", *(f"      {line}" for line in shown[1:])]
