"""``validate`` and ``publish``: event definitions read from files, checked completely, stored."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import build_registry, validation_registry
from cli.common import (
    CLI_ACTOR,
    EXIT_FAILED,
    EXIT_OK,
    CommandFailed,
    database_url,
    load_config,
    on_database,
    plural,
    require_schema,
)
from runner import catalog, schedule
from runner.clock import SystemClock, utcnow
from runner.definitions import EventDefinition, ManualSchedule, load_file
from runner.errors import DefinitionError, Problem
from runner.preflight import preflight
from wiring.config import Config

DEFINITION_SUFFIXES = (".yaml", ".yml")


@dataclass
class CheckedFile:
    path: Path
    definition: EventDefinition | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.definition is not None and not self.problems


def definition_files(arguments: Sequence[str]) -> list[Path]:
    """Files as given; a directory stands for the ``*.yaml`` / ``*.yml`` files in it."""
    paths: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in DEFINITION_SUFFIXES and p.is_file())
            if not found:
                raise CommandFailed(f"{path}: no *.yaml or *.yml files in this directory")
            paths.extend(found)
        else:
            paths.append(path)
    return paths


def check_files(paths: Sequence[Path], config: Config | None = None) -> list[CheckedFile]:
    """Validate every file completely (schema and each step's params), then check that no two
    files use one key: publishing both would make the second silently replace the first. With a
    config that names a server's channels or roles, every alias each step names is checked
    against it too (``check_aliases``)."""
    registry = validation_registry()
    checked: list[CheckedFile] = []
    for path in paths:
        try:
            checked.append(CheckedFile(path, load_file(path, registry)))
        except DefinitionError as exc:
            checked.append(CheckedFile(path, None, list(exc.problems)))
    if config is not None and (config.channels or config.roles):
        asyncio.run(check_aliases(checked, config))
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
    return checked


async def check_aliases(checked: Sequence[CheckedFile], config: Config) -> None:
    """Every channel, ``gm_channel`` and ping role the valid definitions name, against the
    config. It is the preflight the bot runs before a start, with the rehearsal's offline
    delivery in Discord's place: that delivery refuses what the config lacks, exactly as it does
    when the step runs, so what passes here is what a rehearsal (and the bot) will post."""
    from rehearsal import Console, ConsoleDelivery

    async def no_context(run_id: int, step_id: int) -> None:
        return None

    console = Console(SystemClock(), as_json=False, stream=io.StringIO())
    registry = build_registry(ConsoleDelivery(console, config), no_context)
    for item in checked:
        if item.definition is None:
            continue
        found = await preflight(registry, item.definition, scope=item.definition.run_scopes()[0])
        item.problems.extend(
            Problem(p.message, file=str(item.path), phase=p.phase, step=p.step, field=p.field) for p in found
        )


def _print_problems(item: CheckedFile) -> None:
    print(f"FAIL  {item.path}: {plural(len(item.problems), 'problem')}")
    for problem in item.problems:
        print(f"      {problem}")


def cmd_validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    checked = check_files(definition_files(args.files), config)
    for item in checked:
        if item.valid:
            assert item.definition is not None
            print(f"ok    {item.path}: {_summary(item.definition)}")
            for line in next_lines(item.definition, utcnow()):
                print(f"      {line}")
        else:
            _print_problems(item)
    invalid = sum(not item.valid for item in checked)
    print(f"{len(checked) - invalid} valid, {invalid} invalid")
    return EXIT_FAILED if invalid else EXIT_OK


def _summary(definition: EventDefinition) -> str:
    steps = sum(len(phase.steps) for phase in definition.phases)
    scopes = f"scopes {', '.join(definition.scopes)}" if definition.scopes else "no scopes"
    return (
        f"{definition.key} ({definition.title!r}): {plural(len(definition.phases), 'phase')}, "
        f"{plural(steps, 'step')}, {scopes}, {schedule.describe(definition.schedule)}"
    )


NEXT_SHOWN = 3


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


def cmd_publish(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.files:
        paths = definition_files(args.files)
    else:
        directory = Path(config.definitions_dir)
        if not directory.is_dir():
            raise CommandFailed(
                f"definitions_dir {str(directory)!r} is not a directory: name files to publish, "
                "or set definitions_dir in the config"
            )
        paths = definition_files([str(directory)])
    checked = check_files(paths, config)
    invalid = [item for item in checked if not item.valid]
    if invalid:
        for item in invalid:
            _print_problems(item)
        print("nothing was published: fix the problems above and publish again")
        return EXIT_FAILED
    url = database_url(args, config)

    async def publish_all(engine: AsyncEngine) -> list[tuple[CheckedFile, catalog.Published]]:
        await require_schema(engine, url)
        results = []
        for item in checked:
            assert item.definition is not None
            published = await catalog.publish(
                engine, item.definition, utcnow(), source=str(item.path), actor=CLI_ACTOR
            )
            results.append((item, published))
        return results

    for item, published in asyncio.run(on_database(url, publish_all)):
        verb = "published" if published.changed else "unchanged"
        print(f"{verb} {published.key} v{published.version} ({item.path})")
    return EXIT_OK
