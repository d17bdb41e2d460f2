"""The command line: ``python -m bot COMMAND`` (see ``python -m bot --help``).

Each command parses its arguments, calls one function of the runner (or of ``bot.rehearsal`` /
``bot.app``), and renders the answer; no SQL lives here. Configuration is read once, in the
command that needs it, and passed down.

Exit codes: 0 done; 1 what was asked for did not succeed (an invalid definition, a rehearsal that
did not complete, a missing token, an unreachable database); 2 a usage or configuration error
(a bad config, or a ``--database`` URL that cannot be used).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from actions import build_registry, validation_registry
from bot import config as config_module
from bot.config import Config, ConfigError
from runner import catalog, schedule, views
from runner.clock import SystemClock, utcnow
from runner.db import DATABASE_ERRORS, DatabaseUrlError, check_url, create_engine, masked_url
from runner.definitions import EventDefinition, load_file
from runner.errors import DefinitionError, Problem
from runner.migrate import current_revision, upgrade
from runner.preflight import preflight

DEFAULT_CONFIG = "config.yaml"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
DEFINITION_SUFFIXES = (".yaml", ".yml")
CLI_ACTOR = "cli"

T = TypeVar("T")


class CommandFailed(Exception):
    """The command could not do what was asked; the message says why, in one line."""


class UsageError(Exception):
    """An argument the command cannot use (exit code 2); the message says why, in one line."""


# ── Shared helpers ──────────────────────────────────────────────────────────


def load_config(path: str | None) -> Config:
    """``--config PATH``, else ``config.yaml`` in the working directory if there is one, else
    the built-in defaults. ``EVENTBOT_*`` environment variables override either."""
    if path is None and Path(DEFAULT_CONFIG).is_file():
        path = DEFAULT_CONFIG
    return config_module.load(path)


def shown_url(url: str) -> str:
    """A database URL fit to print: the password is never shown."""
    return masked_url(url)


def checked_database(url: str, origin: str = "--database") -> str:
    """``url`` if ``runner.db.check_url`` accepts it, else ``UsageError``: one line, naming
    where the URL came from and what is wrong with it, the password hidden."""
    try:
        check_url(url)
    except DatabaseUrlError as exc:
        raise UsageError(f"{origin}: {config_module.redact(str(exc))}") from None
    return url


def _engine_for(url: str) -> AsyncEngine:
    return create_engine(checked_database(url, "database url"))


async def _on_database(url: str, work: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``work`` with an engine for ``url`` and always dispose of it; connection failures
    become one readable line rather than a traceback."""
    check_sqlite_location(url)
    engine = _engine_for(url)
    try:
        return await work(engine)
    except DATABASE_ERRORS as exc:
        # aiosqlite stops its worker thread after a failed connect without waiting for it; let
        # the thread report back before asyncio.run closes this loop under it. (OSError: the
        # driver opens TLS files and sockets itself, e.g. an ssl_cipher OpenSSL refuses.)
        await asyncio.sleep(0.1)
        reason = getattr(exc, "orig", None) or exc
        raise CommandFailed(f"cannot use the database at {shown_url(url)}: {reason}") from None
    finally:
        await engine.dispose()


def check_sqlite_location(url: str, *, must_exist: bool = False) -> None:
    """Refuse a SQLite path that cannot work before connecting: a missing directory (SQLite
    would fail with "unable to open database file"), or, when reading, a missing file (SQLite
    would create an empty one)."""
    parsed = check_url(checked_database(url, "database url"))
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return
    path = Path(parsed.database)
    if must_exist and not path.exists():
        raise CommandFailed(
            f"no database at {path}: run `python -m bot migrate` first "
            "(or pass --database / set EVENTBOT_DATABASE_URL)"
        )
    if not path.parent.is_dir():
        raise CommandFailed(
            f"cannot use the database at {shown_url(url)}: the directory {path.parent} does not exist"
        )


async def _require_schema(engine: AsyncEngine, url: str) -> None:
    if await current_revision(engine) is None:
        raise CommandFailed(
            f"the database at {shown_url(url)} has no eventbot tables yet: run `python -m bot migrate` first"
        )


def _database_url(args: argparse.Namespace, config: Config) -> str:
    """``--database``, checked here; else ``database_url``, which the config check has checked."""
    if args.database is not None:
        return checked_database(args.database)
    return config.database_url


# ── Definitions from files ──────────────────────────────────────────────────


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
    from bot.rehearsal import Console, ConsoleDelivery

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
    print(f"FAIL  {item.path}: {_plural(len(item.problems), 'problem')}")
    for problem in item.problems:
        print(f"      {problem}")


# ── Commands ────────────────────────────────────────────────────────────────


def _leftover_rehearsal_arguments(args: argparse.Namespace) -> None:
    """``--resume`` / ``--cancel`` act on the runs already in ``--database``, never a file."""
    flag = "--resume" if args.resume else "--cancel"
    if args.database is None:
        raise UsageError(f"{flag} needs --database URL: the database the interrupted rehearsal kept")
    if args.file is not None:
        raise UsageError(f"{flag} acts on the rehearsal runs already in --database: leave out FILE")
    if args.scope is not None:
        raise UsageError(f"{flag} acts on every rehearsal run in --database: leave out --scope")
    if args.cancel is not None and not args.cancel.strip():
        raise UsageError("--cancel needs a reason; it goes in each run's history")


def cmd_rehearse(args: argparse.Namespace) -> int:
    from bot.rehearsal import RehearsalOptions, cancel_rehearsals, is_terminal, rehearse, resume_rehearsals

    leftovers = args.resume or args.cancel is not None
    if leftovers:
        _leftover_rehearsal_arguments(args)
    elif args.file is None:
        raise UsageError("name the event definition FILE to rehearse")
    config = load_config(args.config)
    cues = args.cues or ("ask" if is_terminal(sys.stdin) else "confirm")
    options = RehearsalOptions(
        file=None if leftovers else Path(args.file),
        cues=cues,
        speed=args.speed,
        scope=args.scope,
        database_url=args.database,
        as_json=args.json,
    )
    if args.database is not None:
        # Refuse a bad URL before anything starts; runs to carry on need a database that exists.
        check_sqlite_location(checked_database(args.database), must_exist=leftovers)
    if args.cancel is not None:

        async def cancel(engine: AsyncEngine) -> int:
            await _require_schema(engine, args.database)
            return await cancel_rehearsals(engine, args.cancel.strip(), as_json=args.json)

        return asyncio.run(_on_database(args.database, cancel))
    try:
        return asyncio.run(resume_rehearsals(options, config) if args.resume else rehearse(options, config))
    except BrokenPipeError:
        raise  # the reader went away (``| head``): main() ends quietly, the database is fine
    except DATABASE_ERRORS as exc:
        where = shown_url(args.database) if args.database else "the temporary rehearsal database"
        raise CommandFailed(f"cannot use {where}: {getattr(exc, 'orig', None) or exc}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    checked = check_files(definition_files(args.files), config)
    for item in checked:
        if item.valid:
            assert item.definition is not None
            print(f"ok    {item.path}: {_summary(item.definition)}")
        else:
            _print_problems(item)
    invalid = sum(not item.valid for item in checked)
    print(f"{len(checked) - invalid} valid, {invalid} invalid")
    return EXIT_FAILED if invalid else EXIT_OK


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _summary(definition: EventDefinition) -> str:
    steps = sum(len(phase.steps) for phase in definition.phases)
    scopes = f"scopes {', '.join(definition.scopes)}" if definition.scopes else "no scopes"
    return (
        f"{definition.key} ({definition.title!r}): {_plural(len(definition.phases), 'phase')}, "
        f"{_plural(steps, 'step')}, {scopes}, {schedule.describe(definition.schedule)}"
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
    url = _database_url(args, config)

    async def publish_all(engine: AsyncEngine) -> list[tuple[CheckedFile, catalog.Published]]:
        await _require_schema(engine, url)
        results = []
        for item in checked:
            assert item.definition is not None
            published = await catalog.publish(
                engine, item.definition, utcnow(), source=str(item.path), actor=CLI_ACTOR
            )
            results.append((item, published))
        return results

    for item, published in asyncio.run(_on_database(url, publish_all)):
        verb = "published" if published.changed else "unchanged"
        print(f"{verb} {published.key} v{published.version} ({item.path})")
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = _database_url(args, config)

    async def migrate(engine: AsyncEngine) -> str | None:
        await upgrade(engine)
        return await current_revision(engine)

    revision = asyncio.run(_on_database(url, migrate))
    print(f"database {shown_url(url)} is at revision {revision} (head)")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    url = _database_url(args, config)
    check_sqlite_location(url, must_exist=True)

    async def read(engine: AsyncEngine) -> list[views.RunSummary]:
        await _require_schema(engine, url)
        return await views.list_runs(engine, in_flight_only=not args.all, limit=args.limit)

    runs = asyncio.run(_on_database(url, read))
    if args.json:
        for run in runs:
            print(json.dumps(run.__dict__, default=str))
        return EXIT_OK
    if not runs:
        print("no runs" if args.all else "no runs in flight (--all shows finished ones too)")
        return EXIT_OK
    print(_table(runs))
    return EXIT_OK


RUN_COLUMNS = ("ID", "EVENT", "SCOPE", "STATUS", "HEALTH", "PHASE", "SCHEDULED (UTC)", "MODE", "LAST ERROR")


def _table(runs: Sequence[views.RunSummary]) -> str:
    rows = [
        (
            str(run.id),
            run.definition_key,
            run.scope or "-",
            run.status,
            run.health,
            run.current_phase or "-",
            run.scheduled_for.strftime("%Y-%m-%d %H:%M:%S"),
            "rehearsal" if run.rehearsal else "live",
            # A run the runner cannot read is left alone with no error of its own: say why.
            _one_line(f"definition unreadable: {run.unreadable}" if run.unreadable else run.last_error)[:80],
        )
        for run in runs
    ]
    widths = [max(len(row[i]) for row in [RUN_COLUMNS, *rows]) for i in range(len(RUN_COLUMNS))]
    lines = [_format_row(RUN_COLUMNS, widths)] + [_format_row(row, widths) for row in rows]
    return "\n".join(lines)


def _one_line(text: str | None) -> str:
    return (text or "-").replace("\n", " ")


def _format_row(row: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()


def _token_or_explain() -> str | None:
    token = config_module.token_from_env()
    if token is None:
        print(
            f"{config_module.TOKEN_ENV} is not set: export the bot token from the Discord developer "
            f"portal as {config_module.TOKEN_ENV} (it is never read from the config file)",
            file=sys.stderr,
        )
    return token


def cmd_run(args: argparse.Namespace) -> int:
    token = _token_or_explain()
    if token is None:
        return EXIT_FAILED
    config = load_config(args.config)
    from bot.app import run_bot
    from bot.errors import StartupError

    try:
        asyncio.run(run_bot(config, token))
    except StartupError as exc:  # one line, written never to contain the token
        raise CommandFailed(str(exc)) from None
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    token = _token_or_explain()
    if token is None:
        return EXIT_FAILED
    config = load_config(args.config)
    guild_id = None if args.everywhere else (args.guild or config.guild_id)
    from bot.app import sync_commands
    from bot.errors import StartupError

    try:
        names = asyncio.run(sync_commands(config, token, guild_id))
    except StartupError as exc:
        raise CommandFailed(str(exc)) from None
    commands = ", ".join(f"/{name}" for name in names or []) or "no commands"
    if guild_id is None:
        print(f"synced {commands} globally (Discord can take up to an hour to show them everywhere)")
    else:
        print(f"synced {commands} to guild {guild_id}")
    return EXIT_OK


# ── The parser ──────────────────────────────────────────────────────────────


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be greater than zero")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than zero")
    return value


def _add_database(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--database",
        metavar="URL",
        help=f"{what} (overrides database_url and EVENTBOT_DATABASE_URL), e.g. "
        "sqlite+aiosqlite:///eventbot.sqlite3 or mysql+asyncmy://user:pass@host/db",
    )


def build_parser() -> argparse.ArgumentParser:
    # Options every command accepts, before or after its name. SUPPRESS keeps a subcommand that
    # was not given the option from overwriting the value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"the config file (default: ./{DEFAULT_CONFIG} if it exists, else built-in defaults)",
    )
    common.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="log more (-v info, -vv debug)"
    )

    parser = argparse.ArgumentParser(
        prog="python -m bot",
        formatter_class=_Formatter,
        description=(
            "eventbot: a Discord bot that runs live events for game communities.\n\n"
            "Staff write events in YAML (phases of steps); the runner carries them out."
        ),
        epilog=(
            "first steps:\n"
            "  python -m bot rehearse examples/invasion.yaml   play an event here, nothing sent\n"
            "  python -m bot validate events/                  check definitions\n"
            "  python -m bot migrate && python -m bot publish  set up the database, store events\n"
            "  python -m bot sync && python -m bot run         register commands, start the bot\n\n"
            "The bot token only ever comes from DISCORD_TOKEN; EVENTBOT_* variables override the config."
        ),
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=None,
        help=f"the config file (default: ./{DEFAULT_CONFIG} if it exists, else built-in defaults)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, summary: str, description: str, handler: Callable[[argparse.Namespace], int]
    ) -> Any:
        sub = commands.add_parser(
            name, help=summary, description=description, parents=[common], formatter_class=_Formatter
        )
        sub.set_defaults(handler=handler)
        return sub

    rehearse = command(
        "rehearse",
        "play an event definition here, on a virtual clock; nothing is sent to Discord",
        "Run FILE through the real engine on a temporary SQLite database, with a console in place\n"
        "of Discord: announcements are printed as players would see them (channel, text, embed,\n"
        "who would be pinged), cues as the GM would see them, answered here. Waits pass at once\n"
        "on a virtual clock (or --speed times faster than real time); the virtual time since the\n"
        "start is printed beside each line. The runs are marked as rehearsals.\n\n"
        "If the config names channels, every channel and role alias is checked against it, as\n"
        "the bot would: an unknown one fails its step here rather than in the live event.\n\n"
        "With --database the rehearsal is kept in that database. One that was interrupted\n"
        "(Ctrl-C, a crash, a pause, a cue left unanswered) leaves its runs in flight, and a new\n"
        "rehearsal refuses the database; carry them on with --resume (paused runs are resumed\n"
        "past their failed step, cues answered as --cues says), or cancel them with\n"
        "--cancel REASON. Neither takes a FILE, and neither touches a live run.\n\n"
        "Exit code: 0 when every run completed (or, with --cancel, every rehearsal run was\n"
        "cancelled), 1 otherwise (invalid file, a step failed and paused or aborted the run, a\n"
        "cue was not answered).",
        cmd_rehearse,
    )
    rehearse.epilog = (
        "examples:\n"
        "  python -m bot rehearse examples/invasion.yaml --cues confirm\n"
        "  python -m bot rehearse examples/quiz-night.yaml --speed 60     a minute a second\n"
        "  python -m bot rehearse examples/invasion.yaml --scope aurora --json | jq .\n"
        "  python -m bot rehearse examples/invasion.yaml --database sqlite+aiosqlite:///r.sqlite3\n"
        "  python -m bot rehearse --database sqlite+aiosqlite:///r.sqlite3 --resume\n"
        "  python -m bot rehearse --database sqlite+aiosqlite:///r.sqlite3 --cancel 'start over'\n\n"
        "--json prints one object per line, with a 'type': status (run status changes), phase,\n"
        "step (outcomes: done, parked, retry, failed, confirmed, skipped), delivery (announce or\n"
        "cue, as shown), final (one per run), error and problem."
    )
    rehearse.add_argument(
        "file", metavar="FILE", nargs="?", help="the event definition (YAML); not with --resume / --cancel"
    )
    rehearse.add_argument(
        "--cues",
        choices=("ask", "confirm", "skip"),
        help="how GM cues are answered: ask at the keyboard, or confirm / skip every one "
        "(default: ask when run in a terminal, confirm otherwise)",
    )
    rehearse.add_argument(
        "--speed",
        type=_positive_float,
        metavar="N",
        help="let waits really pass, N times faster than real time (default: instantly)",
    )
    rehearse.add_argument("--scope", help="rehearse one scope only (default: every scope of the event)")
    rehearse.add_argument("--json", action="store_true", help="one JSON object per line, for tools")
    _add_database(
        rehearse,
        "keep the rehearsal in this database instead of a temporary one; it must have no runs in "
        "flight, so never the live bot's",
    )
    leftover = rehearse.add_mutually_exclusive_group()
    leftover.add_argument(
        "--resume",
        action="store_true",
        help="carry on the rehearsal runs an interrupted rehearsal left in --database, to their end",
    )
    leftover.add_argument(
        "--cancel",
        metavar="REASON",
        help="cancel the rehearsal runs an interrupted rehearsal left in --database",
    )

    validate = command(
        "validate",
        "check event definitions against the schema and each action's params",
        "Check each FILE completely: the schema (keys, phases, schedule, grace, scopes) and every\n"
        "step's params against the action it names. Every problem is printed with its file,\n"
        "phase, step (counted from 0) and field. A directory stands for its *.yaml/*.yml files.\n\n"
        "When the config (--config, else ./config.yaml) names channels or roles, every channel\n"
        "alias, the gm_channel a cue falls back to, and every ping role is checked against it;\n"
        "publish checks the same. The limits on an event's size and schedule are in the README.\n\n"
        "Exit code: 0 when every file is valid, 1 otherwise.",
        cmd_validate,
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="definition files or directories")

    publish = command(
        "publish",
        "validate and store event definitions in the database",
        "Validate FILEs (or, with none, every *.yaml/*.yml in definitions_dir) and store each as a\n"
        "new immutable version. Identical content is not stored again ('unchanged'). If any file\n"
        "is invalid, nothing is published. Runs already created keep the version they started with.\n\n"
        "Exit code: 0 when everything was published (or unchanged), 1 otherwise.",
        cmd_publish,
    )
    publish.add_argument("files", nargs="*", metavar="FILE", help="definition files or directories")
    _add_database(publish, "publish into this database")

    migrate = command(
        "migrate",
        "create or upgrade the database schema (Alembic upgrade head)",
        "Bring the configured database up to the newest schema. Safe to run again; run it after\n"
        "every upgrade of eventbot, before starting the bot.",
        cmd_migrate,
    )
    _add_database(migrate, "migrate this database")

    runs = command(
        "runs",
        "list runs and their states",
        "List runs, newest first: id, event, scope, status, health, current phase, scheduled\n"
        "time (UTC), live or rehearsal, and the last error. Shows runs in flight unless --all.",
        cmd_runs,
    )
    runs.add_argument("--all", action="store_true", help="include finished runs")
    runs.add_argument(
        "--limit", type=_positive_int, default=50, metavar="N", help="at most N runs (default 50)"
    )
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    _add_database(runs, "read this database")

    command(
        "run",
        "start the bot (needs DISCORD_TOKEN)",
        "Connect to Discord and run events until stopped. The token is read from the DISCORD_TOKEN\n"
        "environment variable only. Run `migrate` first, and `sync` once after installing or\n"
        "upgrading so the slash commands exist.",
        cmd_run,
    )

    sync = command(
        "sync",
        "register the slash commands with Discord (needs DISCORD_TOKEN)",
        "Register the bot's slash commands. With a guild (--guild, or guild_id from the config)\n"
        "they appear there at once; with --global they go to every server the bot is in, which\n"
        "Discord can take up to an hour to show. Run once at deploy, not on every start.\n"
        "The token is read from the DISCORD_TOKEN environment variable only.",
        cmd_sync,
    )
    target = sync.add_mutually_exclusive_group()
    target.add_argument("--guild", type=_positive_int, metavar="ID", help="the guild to register in")
    target.add_argument(
        "--global", dest="everywhere", action="store_true", help="register globally instead of in one guild"
    )
    return parser


# ── Entry point ─────────────────────────────────────────────────────────────


def _exit_code(code: object) -> int:
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_USAGE


def _configure_streams() -> None:
    # Event text is often full of emoji; a console that cannot show one must not crash the run.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")


def _configure_logging(command: str, verbose: int) -> None:
    level = logging.WARNING
    if command in ("run", "sync"):
        level = logging.INFO
    if verbose:
        level = logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command, answer its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already explained
        return _exit_code(exc.code)
    _configure_streams()
    _configure_logging(args.command, args.verbose)
    try:
        return args.handler(args)
    except ConfigError as exc:
        where = f" ({exc.source})" if exc.source else ""
        print(f"the configuration is not valid{where}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return EXIT_USAGE
    except CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, and keep Python's own flush at exit
        # from failing on the same closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
