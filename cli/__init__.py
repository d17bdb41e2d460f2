"""The command line: ``python -m bot COMMAND`` (see ``python -m bot --help``).

Each command parses its arguments, calls one function of the runner (or of ``rehearsal`` /
``bot.app``), and renders the answer; no SQL lives here. Configuration is read once, in the
command that needs it, and passed down.

Exit codes: 0 done; 1 what was asked for did not succeed (an invalid definition, a rehearsal that
did not complete, a missing token, an unreachable database); 2 a usage or configuration error
(a bad config, or a ``--database`` URL that cannot be used). ``health`` answers 1 for a problem
found and 3 for a database it cannot reach, so a monitor tells the two apart.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cli import actions as actions_command
from cli import logs
from cli import signups as signups_command
from cli.common import (
    DEFAULT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandFailed,
    UsageError,
)
from cli.database import cmd_migrate, cmd_runs
from cli.definitions import cmd_publish, cmd_validate
from cli.health import DESCRIPTION as HEALTH_DESCRIPTION
from cli.health import cmd_health
from cli.invite import cmd_invite
from cli.rehearse import cmd_rehearse
from cli.serve import cmd_run, cmd_sync
from cli.upcoming import DEFAULT_COUNT, cmd_upcoming
from runner.states import Control
from wiring.config import ConfigError

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


def _program_name() -> str:
    # Installed, the command line is also the ``eventbot`` script; help shows how it was run.
    invoked = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "eventbot" if invoked in ("eventbot", "eventbot.exe") else "python -m bot"


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
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log more (-v info, the libraries' too; -vv debug); "
        "rehearse: -v its bookkeeping, -vv info, -vvv debug",
    )
    common.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=argparse.SUPPRESS,
        help="log lines as text (default) or as one JSON object per line",
    )

    parser = argparse.ArgumentParser(
        prog=_program_name(),
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
            "  python -m bot upcoming                          what the schedule holds next\n"
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
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, the libraries' too; -vv debug)"
    )
    parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default="text",
        help="log lines as text (default) or as one JSON object per line",
    )
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
        "What is printed is what players and GMs would see, each wait, what went wrong and how\n"
        "each run ended; -v adds the engine's bookkeeping (status transitions, each step done,\n"
        "each phase closing), -vv the log lines too. --json always carries every record.\n\n"
        "If the config names channels, every channel and role alias is checked against it, as\n"
        "the bot would: an unknown one fails its step here rather than in the live event. The\n"
        "first line says which config that was, or 'no config: channel and role aliases not\n"
        "checked'. The event's reminders are sent first, each at its virtual time before the\n"
        "start (-01:00:00; the start is +00:00:00); a failed one makes the exit code 1.\n\n"
        "With --database the rehearsal is kept in that database. One that was interrupted\n"
        "(Ctrl-C, a crash, a pause, a cue left unanswered) leaves its runs in flight, and a new\n"
        "rehearsal refuses the database; carry them on with --resume (paused runs are resumed\n"
        "past their failed step, cues answered as --cues says), or cancel them with\n"
        "--cancel REASON. Neither takes a FILE, and neither touches a live run.\n\n"
        "Exit code: 0 when every run completed (or, with --cancel, every rehearsal run was\n"
        "cancelled), 1 otherwise (invalid file, a step failed and paused or aborted the run, a\n"
        "reminder failed, a cue was not answered).",
        cmd_rehearse,
    )
    rehearse.epilog = (
        "examples:\n"
        "  python -m bot rehearse examples/invasion.yaml --cues confirm\n"
        "  python -m bot rehearse examples/quiz-night.yaml --speed 60     a minute a second\n"
        "  python -m bot rehearse examples/invasion.yaml -v              status transitions too\n"
        "  python -m bot rehearse examples/invasion.yaml --scope aurora --json | jq .\n"
        "  python -m bot rehearse examples/invasion.yaml --database sqlite+aiosqlite:///r.sqlite3\n"
        "  python -m bot rehearse --database sqlite+aiosqlite:///r.sqlite3 --resume\n"
        "  python -m bot rehearse --database sqlite+aiosqlite:///r.sqlite3 --cancel 'start over'\n\n"
        "--json prints one object per line, with a 'type': status (run status changes), phase,\n"
        "step (outcomes: done, parked, retry, failed, confirmed, skipped), delivery (announce or\n"
        "cue, as shown), reminder (sent or failed, before the start), final (one per run),\n"
        "error and problem."
    )
    rehearse.add_argument(
        "file", metavar="FILE", nargs="?", help="the event definition (YAML); not with --resume / --cancel"
    )
    rehearse.add_argument(
        "--cues",
        choices=("ask", Control.CONFIRM.value, Control.SKIP.value),
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
    rehearse.add_argument(
        "--signups", metavar="N|CHOICES", help="N simulated members sign up (or: tank,tank,dps)"
    )
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
        "phase, step (by its place: 1st step) and field. A directory stands for its *.yaml/*.yml files.\n"
        "A scheduled event's next three occurrences are printed, in its own time zone and UTC;\n"
        "a once that is already over is refused.\n\n"
        "When the config (--config, else ./config.yaml) names channels or roles, every channel\n"
        "alias, the gm_channel a cue falls back to, and every ping role, of the steps and the\n"
        "reminders alike, is checked against it; publish checks the same. The first line says\n"
        "which config that was, or 'no config: channel and role aliases not checked'. The\n"
        "limits on an event's size and schedule are in docs/writing-events.md.\n\n"
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
        "time (UTC), live or rehearsal, and the last error. Shows runs in flight unless --all.\n"
        "A last line counts the runs only scheduled (not started yet) apart from those under way;\n"
        "with nothing in flight, the next occurrence of the schedule is named (see `upcoming`).",
        cmd_runs,
    )
    runs.add_argument("--all", action="store_true", help="include finished runs")
    runs.add_argument(
        "--limit", type=_positive_int, default=50, metavar="N", help="at most N runs (default 50)"
    )
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    _add_database(runs, "read this database")

    health = command(
        "health",
        "check the database, the bot processes and the runs; exit code 0 when healthy",
        HEALTH_DESCRIPTION,
        cmd_health,
    )
    health.add_argument("--json", action="store_true", help="one JSON object, for tools")
    _add_database(health, "check this database")

    invite = command(
        "invite",
        "print the URL that adds the bot with exactly the permissions its events need",
        "Print the OAuth2 URL that invites the bot to a server with the permissions the config\n"
        "and the event definitions (FILES, default: the config's definitions_dir, the base only\n"
        "while it does not exist) need, and why each: posting and embeds always; Manage Events\n"
        "for the Events tab; threads with a discord.thread step; Manage Roles with an\n"
        "attendee_role. The application id is --client-id, or read from DISCORD_TOKEN (never\n"
        "printed). Exit code 1 if a definition is invalid or no application id is known.",
        cmd_invite,
    )
    invite.add_argument("files", nargs="*", metavar="FILE", help="definition files or folders")
    invite.add_argument("--client-id", metavar="ID", help="the application id (default: from DISCORD_TOKEN)")

    upcoming = command(
        "upcoming",
        "list the next occurrences of published scheduled events, per scope",
        "List what the schedule holds next for each published event with a cron or once\n"
        "schedule (or for EVENT only), per scope: the occurrences already created (status\n"
        "scheduled, with their run id, so staff can cancel one before it starts), then the ones\n"
        "the runner will create as they come near. Each time is shown in the event's own time\n"
        "zone (a cron's; UTC for a once) and in UTC; an event's reminders are listed by lead time.",
        cmd_upcoming,
    )
    upcoming.add_argument("event", nargs="?", metavar="EVENT", help="one event's key (default: every event)")
    upcoming.add_argument(
        "--count",
        type=_positive_int,
        default=DEFAULT_COUNT,
        metavar="N",
        help=f"occurrences per scope (default {DEFAULT_COUNT})",
    )
    upcoming.add_argument("--json", action="store_true", help="one JSON object per event")
    _add_database(upcoming, "read this database")

    signups_command.register(command, _add_database)
    actions_command.register(command)

    run = command(
        "run",
        "start the bot (needs DISCORD_TOKEN)",
        "Connect to Discord and run events until stopped. The token is read from the DISCORD_TOKEN\n"
        "environment variable only. Run `migrate` first, and `sync` once after installing or\n"
        "upgrading so the slash commands exist.\n\n"
        "While Discord or the database cannot be reached it keeps trying, one log line per\n"
        "attempt, waiting --retry-first seconds and twice as long each time up to --retry-cap.\n"
        "What waiting cannot fix (a refused token, a database at another schema, a refused\n"
        "database password) stops it at once with one line. SIGTERM or Ctrl-C stop it cleanly:\n"
        "runs keep their state and are given back for the next start.\n\n"
        "Exit code: 0 when stopped by SIGTERM or Ctrl-C, 1 when it could not start, 2 for a bad\n"
        "config or option.",
        cmd_run,
    )
    run.add_argument(
        "--retry-first",
        type=_positive_float,
        default=2.0,
        metavar="SECONDS",
        help="wait before the first retry (default 2)",
    )
    run.add_argument(
        "--retry-cap",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="longest wait between retries (default 60)",
    )

    sync = command(
        "sync",
        "register the slash commands with Discord (needs DISCORD_TOKEN)",
        "Register the bot's slash commands. With a guild (--guild, or guild_id from the config)\n"
        "they appear there at once; with --global they go to every server the bot is in, which\n"
        "Discord can take up to an hour to show. With neither a guild nor --global nothing is\n"
        "registered. Run once at deploy, not on every start.\n"
        "The token is read from the DISCORD_TOKEN environment variable only.",
        cmd_sync,
    )
    target = sync.add_mutually_exclusive_group()
    target.add_argument("--guild", type=_positive_int, metavar="ID", help="the guild to register in")
    target.add_argument(
        "--global",
        dest="everywhere",
        action="store_true",
        help="register in every server the bot is in (needed when no guild is configured)",
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


def _configure_logging(command: str, verbose: int, log_format: str) -> None:
    level = logging.WARNING
    if command in ("run", "sync"):
        level = logging.INFO
    if command == "rehearse":
        # Its first -v is the transcript's (the engine's bookkeeping); log lines start at -vv.
        verbose -= 1
    if verbose > 0:
        level = logging.INFO if verbose == 1 else logging.DEBUG
    logs.configure(level, quiet_libraries=verbose <= 0, log_format=log_format, stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command, answer its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already explained
        return _exit_code(exc.code)
    _configure_streams()
    _configure_logging(args.command, args.verbose, args.log_format)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ConfigError as exc:
        where = f" ({exc.source})" if exc.source else ""
        print(f"the configuration is not valid{where}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {logs.redacted(problem)}", file=sys.stderr)
        return EXIT_USAGE
    # Written never to hold a secret; hidden here all the same, for the day an exception's own
    # text (a driver's, Discord's) quotes one.
    except CommandFailed as exc:
        print(f"error: {logs.redacted(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    except UsageError as exc:
        print(f"error: {logs.redacted(str(exc))}", file=sys.stderr)
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
