"""``invite``: the URL that adds the bot to a server with exactly the permissions the config and
the event definitions need, no more (a bot invited as Administrator is one leaked token away
from the whole server).

What needs what is the bot's own list, the one preflight and ``/event health`` check against
(``bot.discord_delivery``'s SEND, EMBED and THREAD): every bot posts and embeds; Manage Events
when an event is listed in the Events tab; Create Public Threads, Send Messages in Threads and
Manage Threads (to take a member out) with a ``discord.thread`` step; Manage Roles with an
``attendee_role``; Mention Everyone with ``announce.allow_everyone``. The application id is
``--client-id``, or read from the token in ``DISCORD_TOKEN`` (its first part is the bot's id);
the token itself is never printed."""

from __future__ import annotations

import argparse
import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

import discord

from bot.discord_delivery import EMBED, SEND, THREAD
from cli.common import EXIT_FAILED, EXIT_OK, CommandFailed, load_config
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
    if given:
        if not given.isdigit():
            raise CommandFailed(f"--client-id {given!r} is not an application id (digits only)")
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


def cmd_invite(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    paths = definition_files(args.files or [config.definitions_dir])
    checked = check_files(paths)
    invalid = [item for item in checked if not item.valid]
    for item in invalid:
        print(f"FAIL  {item.path}: fix it first (python -m bot validate {item.path})")
    if invalid:
        return EXIT_FAILED
    definitions = [item.definition for item in checked if item.definition is not None]
    found = needed(config, definitions)
    print(invite_url(application_id(args.client_id, token_from_env()), [n.permission for n in found]))
    print(f"\npermissions for {len(definitions)} event definition(s):")
    for each in found:
        print(f"  {each.permission.replace('_', ' ')}: {each.why}")
    return EXIT_OK
