"""``invite``: the URL that adds the bot to a server with exactly the permissions the config and
the event definitions need, no more (a bot invited as Administrator is one leaked token away
from the whole server).

What needs what is the bot's own list, the one preflight and ``/event health`` check against
(``bot.discord_delivery``'s SEND, EMBED and THREAD): every bot posts and embeds; Manage Events
when an event is listed in the Events tab; Create Public Threads, Send Messages in Threads and
Manage Threads (to take a member out) with a ``discord.thread`` step; Manage Roles with an
``attendee_role``; Mention Everyone with ``announce.allow_everyone``. The definitions are files
(the config's ``definitions_dir`` by default, the folder ``publish`` reads), not the database:
the invite comes before the database in setup, and a missing ``definitions_dir`` asks for the
base only, saying so. The application id is ``--client-id``, or read from the token in
``DISCORD_TOKEN`` (its first part is the bot's id); the token itself is never printed."""

from __future__ import annotations

import argparse
import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import discord

from bot.discord_messages import EMBED, SEND, THREAD, permission_name
from cli.common import EXIT_FAILED, EXIT_OK, CommandFailed, UsageError, load_config, plural
from cli.definitions import check_files, definition_files
from runner.definitions import EventDefinition
from runner.preflight import THREAD_ACTION
from wiring.config import Config, token_from_env

AUTHORIZE = "https://discord.com/oauth2/authorize"


@dataclass(frozen=True)
class Needed:
    permission: str
    why: str


def needed(config: Config, definitions: Iterable[EventDefinition]) -> list[Needed]:
    """Each permission the bot needs, with the feature that needs it."""
    # Sign-up messages, cues and the staff log are posts with embeds and buttons: these cover them.
    found = [Needed(p, "posting events' messages") for p in (*SEND, *EMBED)]
    events = list(definitions)
    if config.announce.allow_everyone:
        found.append(Needed("mention_everyone", "announce.allow_everyone"))
    if any(d.discord_event_settings(config.discord_events.mirror) is not None for d in events):
        found.append(Needed("manage_events", "listing events in the Events tab"))
    steps = [step for d in events for phase in d.phases for step in phase.steps]
    if any(step.action == THREAD_ACTION for step in steps):
        found += [Needed(p, "a discord.thread step") for p in THREAD]
        found.append(Needed("manage_threads", "taking members out of an event thread"))
    if any(d.signup is not None and d.signup.attendee_role for d in events):
        found.append(Needed("manage_roles", "a sign-up's attendee_role"))
    return found


def application_id(given: str | None, token: str | None) -> str:
    if given is not None:
        if not (given.isascii() and given.isdigit()):
            raise UsageError(f"--client-id {given!r} is not an application id (digits only)")
        return given
    if token:
        first = token.split(".", 1)[0]
        try:
            decoded = base64.b64decode(first + "=" * (-len(first) % 4), validate=False).decode("ascii")
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        if decoded.isdigit():
            return decoded
        raise CommandFailed("DISCORD_TOKEN does not look like a bot token; give --client-id instead")
    raise CommandFailed(
        "no application id: give --client-id (the developer portal's Application ID) or set DISCORD_TOKEN"
    )


def invite_url(client_id: str, permissions: Iterable[str]) -> str:
    value = discord.Permissions(**dict.fromkeys(permissions, True)).value
    query = {"client_id": client_id, "scope": "bot applications.commands", "permissions": str(value)}
    return f"{AUTHORIZE}?{urlencode(query)}"


def _definitions(args: argparse.Namespace, config: Config) -> list[EventDefinition] | None:
    """The definitions FILES name (default: ``definitions_dir``), or None after printing why
    some cannot be read. A ``definitions_dir`` not written yet is no definitions: the invite
    usually comes first in setup."""
    if not args.files and not Path(config.definitions_dir).exists():
        print(f"no event definitions yet ({config.definitions_dir}/, definitions_dir): the base only")
        return []
    checked = check_files(definition_files(args.files or [config.definitions_dir]))
    invalid = [item for item in checked if not item.valid]
    for item in invalid:
        print(f"FAIL  {item.path}: {plural(len(item.problems), 'problem')}")
        for problem in item.problems:
            print(f"      {problem}")
    if invalid:
        print("no invite: fix the definitions above (python -m bot validate shows the same)")
        return None
    return [item.definition for item in checked if item.definition is not None]


def cmd_invite(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    client_id = application_id(args.client_id, token_from_env())
    definitions = _definitions(args, config)
    if definitions is None:
        return EXIT_FAILED
    found = needed(config, definitions)
    print(invite_url(client_id, [n.permission for n in found]))
    print(f"\npermissions for {plural(len(definitions), 'event definition')}:")
    for each in found:
        print(f"  {permission_name(each.permission)}: {each.why}")
    if config.announce.allowed_ping_roles and not config.announce.allow_everyone:
        # Whether a role is mentionable is only known in Discord; health and preflight check it.
        print(
            f"  not asked, {permission_name('mention_everyone')}: a ping role that is not mentionable "
            "needs it (or make the role mentionable); /event health says which"
        )
    return EXIT_OK
