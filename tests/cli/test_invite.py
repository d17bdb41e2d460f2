"""``python -m bot invite``: the invite URL asks for exactly what the config and the events need
(issue 26 item 5), read off the URL's permission bits, never for more."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import discord
import pytest

from tests.cli.conftest import Cli, definition, write_yaml
from tests.support.definitions import announce, wait

CLIENT = "123456789012345678"
CONFIG = {"channels": {"announcements": 1}, "roles": {"raiders": 2}, "discord_events": {"mirror": False}}


def granted(out: str) -> discord.Permissions:
    url = next(line for line in out.splitlines() if line.startswith("https://"))
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    assert (parts.netloc, parts.path) == ("discord.com", "/oauth2/authorize")
    assert query["client_id"] == [CLIENT] and query["scope"] == ["bot applications.commands"]
    return discord.Permissions(int(query["permissions"][0]))


def invite(cli: Cli, tmp_path: Path, spec: dict, *extra: str) -> discord.Permissions:
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", spec)
    result = cli("invite", event, "--config", config, *extra)
    assert result.code == 0, result.out
    return granted(result.out)


def test_a_plain_event_asks_to_post_and_embed_and_nothing_else(cli: Cli, tmp_path: Path) -> None:
    perms = invite(cli, tmp_path, definition(wait("1m")), "--client-id", CLIENT)
    assert perms == discord.Permissions(view_channel=True, send_messages=True, embed_links=True)


def test_an_attendee_role_adds_manage_roles(cli: Cli, tmp_path: Path) -> None:
    signup = {"options": ["going"], "channel": "announcements", "attendee_role": "raiders"}
    perms = invite(cli, tmp_path, definition(wait("1m"), signup=signup), "--client-id", CLIENT)
    assert perms.manage_roles and not perms.manage_threads and not perms.administrator


def test_a_thread_step_adds_the_thread_permissions(cli: Cli, tmp_path: Path) -> None:
    spec = definition(
        announce("Raid!", label="Call"), {"action": "discord.thread", "params": {"name": "chat"}}
    )
    spec["phases"][0]["steps"][0]["params"]["channel"] = "announcements"
    perms = invite(cli, tmp_path, spec, "--client-id", CLIENT)
    assert perms.create_public_threads and perms.send_messages_in_threads and perms.manage_threads
    assert not perms.manage_roles


def test_the_application_id_is_read_from_the_token_which_is_never_printed(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = base64.b64encode(CLIENT.encode()).decode().rstrip("=") + ".GhIjKl.secret-part-of-the-token"
    monkeypatch.setenv("DISCORD_TOKEN", token)
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    result = cli("invite", write_yaml(tmp_path / "event.yaml", definition(wait("1m"))), "--config", config)
    assert result.code == 0 and granted(result.out).send_messages
    assert "secret-part" not in result.out + result.err


def test_without_an_application_id_it_says_where_to_find_one(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    result = cli("invite", write_yaml(tmp_path / "event.yaml", definition(wait("1m"))), "--config", config)
    assert result.code != 0
    assert "--client-id" in result.out + result.err
