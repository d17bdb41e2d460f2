"""``rehearse``: an event played offline (``rehearsal``), or what an interrupted one left."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from cli.common import (
    CommandFailed,
    UsageError,
    check_sqlite_location,
    checked_database,
    config_path,
    load_config,
    on_database,
    require_schema,
    shown_url,
)
from cli.definitions import config_line
from runner.db import DATABASE_ERRORS
from runner.states import Control


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
    from rehearsal import (
        CueMode,
        RehearsalOptions,
        cancel_rehearsals,
        is_terminal,
        rehearse,
        resume_rehearsals,
    )

    leftovers = args.resume or args.cancel is not None
    if leftovers:
        _leftover_rehearsal_arguments(args)
    elif args.file is None:
        raise UsageError("name the event definition FILE to rehearse")
    config = load_config(args.config)
    # argparse's choices= keeps --cues to the three modes.
    cues: CueMode = args.cues or ("ask" if is_terminal(sys.stdin) else Control.CONFIRM)
    options = RehearsalOptions(
        file=None if leftovers else Path(args.file),
        cues=cues,
        speed=args.speed,
        scope=args.scope,
        database_url=args.database,
        as_json=args.json,
        # The global -v: the engine's bookkeeping in the transcript, beside the log lines.
        verbose=getattr(args, "verbose", 0) > 0,
        config_line=config_line(config_path(args.config), config),
        signups=args.signups,
    )
    if args.database is not None:
        # Refuse a bad URL before anything starts; runs to carry on need a database that exists.
        check_sqlite_location(checked_database(args.database), must_exist=leftovers)
    if args.cancel is not None:

        async def cancel(engine: AsyncEngine) -> int:
            await require_schema(engine, args.database)
            return await cancel_rehearsals(engine, args.cancel.strip(), as_json=args.json)

        return asyncio.run(on_database(args.database, cancel))
    try:
        return asyncio.run(resume_rehearsals(options, config) if args.resume else rehearse(options, config))
    except BrokenPipeError:
        raise  # the reader went away (``| head``): main() ends quietly, the database is fine
    except DATABASE_ERRORS as exc:
        where = shown_url(args.database) if args.database else "the temporary rehearsal database"
        raise CommandFailed(f"cannot use {where}: {getattr(exc, 'orig', None) or exc}") from None
