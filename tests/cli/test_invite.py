"""``python -m bot invite``: the invite URL asks for exactly what the config and the events need
(issue 26 item 5), read off the URL's permission bits, never for more."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import discord
import pytest

from bot.discord_messages import EMBED, SEND
from cli.common import EXIT_FAILED, EXIT_USAGE
from tests.cli.conftest import EXAMPLE_CONFIG, EXAMPLES, Cli, definition, write_yaml
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
    assert result.code == EXIT_FAILED
    assert "--client-id" in result.err and "https://" not in result.out


def test_a_client_id_that_is_not_digits_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    event = write_yaml(tmp_path / "event.yaml", definition(wait("1m")))
    result = cli("invite", event, "--config", config, "--client-id", "my-bot")
    assert result.code == EXIT_USAGE
    assert result.err.startswith("error: --client-id 'my-bot'") and "Traceback" not in result.err


def test_an_invalid_definition_gives_no_invite_and_names_its_problem(cli: Cli, tmp_path: Path) -> None:
    # An invite computed without the broken file could lack the permission that file needs.
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    good = write_yaml(tmp_path / "good.yaml", definition(wait("1m")))
    bad = write_yaml(tmp_path / "bad.yaml", definition(wait("1m"), key="other", colour="red"))
    result = cli("invite", good, bad, "--config", config, "--client-id", CLIENT)
    assert result.code == EXIT_FAILED
    assert "https://" not in result.out
    assert f"FAIL  {bad}" in result.out and "colour" in result.out


def test_before_any_event_is_written_it_asks_for_the_base_and_says_so(cli: Cli, tmp_path: Path) -> None:
    # Setup invites the bot before events/ exists: that is the base, not a failure.
    config = write_yaml(tmp_path / "config.yaml", CONFIG)
    result = cli("invite", "--config", config, "--client-id", CLIENT)
    assert result.code == 0, result.out + result.err
    assert granted(result.out) == discord.Permissions(**dict.fromkeys((*SEND, *EMBED), True))
    assert "no event definitions yet (events/" in result.out


def test_the_events_tab_adds_manage_events(cli: Cli, tmp_path: Path) -> None:
    perms = invite(
        cli, tmp_path, definition(wait("1m"), duration="2h", discord_event=True), "--client-id", CLIENT
    )
    assert perms.manage_events and not perms.manage_roles


def test_everyone_pings_add_mention_everyone_only_when_the_config_allows_them(
    cli: Cli, tmp_path: Path
) -> None:
    spec = definition(wait("1m"))
    assert not invite(cli, tmp_path, spec, "--client-id", CLIENT).mention_everyone
    allowing = {**CONFIG, "announce": {"allow_everyone": True}}
    config = write_yaml(tmp_path / "allowing.yaml", allowing)
    result = cli("invite", write_yaml(tmp_path / "e.yaml", spec), "--config", config, "--client-id", CLIENT)
    assert granted(result.out).mention_everyone


def test_the_examples_with_the_example_config_get_an_invite(cli: Cli) -> None:
    # The examples are what a new server starts from: each must read, and their features ask.
    result = cli("invite", EXAMPLES, "--config", EXAMPLE_CONFIG, "--client-id", CLIENT)
    assert result.code == 0, result.out + result.err
    perms = granted(result.out)
    assert perms.send_messages and perms.embed_links and not perms.administrator
