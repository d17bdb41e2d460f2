"""``python -m bot rehearse`` on an event with a ``discord.signup`` step: the console shows the
sign-up message where the step posts it, with its list and buttons, once."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Cli, announce, definition, write_yaml
from tests.support.definitions import step


def test_the_rehearsal_shows_the_sign_up_message_the_step_posts(cli: Cli, tmp_path: Path) -> None:
    event = write_yaml(
        tmp_path / "event.yaml",
        definition(
            announce("announcements", "The muster begins"),
            step("discord.signup", {"channel": "announcements", "content": "Who is in?"}),
            signup={"options": {"tank": 2, "dps": 4}, "capacity": 5, "closes": "end"},
        ),
    )
    result = cli("rehearse", event, "--cues", "confirm")
    assert result.code == 0, result.out
    (header,) = [line for line in result.lines if "sign-up message in" in line]
    assert header.endswith("run 1: sign-up message in #announcements, no ping"), header
    shown = result.out[result.out.index(header) :]
    assert "Who is in?" in shown
    assert "┃ Sign-ups: Test event" in shown
    assert "┃ tank (0/2): nobody yet" in shown and "┃ dps (0/4): nobody yet" in shown
    assert "┃ — 0/5 signed up · 0 waiting" in shown
    assert "Sign-ups stay open until the event ends." in shown
    assert "[ tank ]  [ dps ]  [ Leave ]\n" in shown, "closes: end: open while the run is in flight"
    assert "run 1: completed (health ok)" in result.out
