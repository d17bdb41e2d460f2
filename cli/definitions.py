"""``validate`` and ``publish``: event definitions read from files, checked completely, stored."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import validation_registry
from cli.common import (
    CLI_ACTOR,
    EXIT_FAILED,
    EXIT_OK,
    CommandFailed,
    config_path,
    database_url,
    load_config,
    on_database,
    plural,
    require_schema,
)
from runner import catalog, schedule
from runner.clock import utcnow
from runner.definitions import EventDefinition
from wiring.config import Config
from wiring.definition_checks import (
    CheckedFile,
    check_aliases,
    check_file,
    check_keys,
    checks_aliases,
    next_lines,
    warnings,
)

DEFINITION_SUFFIXES = (".yaml", ".yml")


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
    files use one key. With a config that names a server's channels or roles, every alias each
    step names is checked against it too. ``/event validate`` and ``/event publish`` check an
    upload with the same functions (``wiring.definition_checks``)."""
    registry = validation_registry()
    checked = [check_file(path, registry) for path in paths]
    if config is not None and checks_aliases(config):
        asyncio.run(check_aliases(checked, config))
    check_keys(checked)
    return checked


NO_CONFIG = "no config: channel and role aliases not checked"


def config_line(path: str | None, config: Config) -> str:
    """Which config the aliases were checked against, or that they were not: an ok from a
    check that had nothing to check against must never read as an ok from one that had."""
    if checks_aliases(config):
        where = path or "the EVENTBOT_* environment variables"
        return f"config: {where} (channel and role aliases checked against it)"
    if path is None:
        return NO_CONFIG
    return f"config: {path} names no channels or roles: channel and role aliases not checked"


def _print_problems(item: CheckedFile) -> None:
    print(f"FAIL  {item.path}: {plural(len(item.problems), 'problem')}")
    for problem in item.problems:
        print(f"      {problem}")


def cmd_validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    print(config_line(config_path(args.config), config))
    checked = check_files(definition_files(args.files), config)
    for item in checked:
        if item.valid:
            assert item.definition is not None
            print(f"ok    {item.path}: {_summary(item.definition)}")
            for warning in warnings(item.definition):
                print(f"      warning: {warning}")
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
