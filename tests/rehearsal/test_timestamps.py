"""The rehearsal shows each Discord timestamp twice: the markup Discord is sent, and what a reader
would see, relative times measured on the rehearsal's own (virtual) clock (issue 11)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from rehearsal.delivery import readable_timestamps, relative
from tests.cli.conftest import Cli, write_yaml
from tests.support.definitions import announce, cue, event, phase, wait

FRIDAY_8PM = 1764964800  # Fri 5 Dec 2025 20:00 UTC


def test_a_timestamp_is_shown_with_its_instant_in_utc_and_a_relative_one_in_words() -> None:
    now = dt.datetime(2025, 12, 5, 19, 45)
    text = (
        f"Quiz <t:{FRIDAY_8PM}:F>, that is <t:{FRIDAY_8PM}:R>; also <t:{FRIDAY_8PM}:t> and <t:{FRIDAY_8PM}>"
    )
    assert readable_timestamps(text, now) == (
        f"Quiz <t:{FRIDAY_8PM}:F> (Fri 5 Dec 2025 20:00 UTC), that is <t:{FRIDAY_8PM}:R> (in 15 minutes); "
        f"also <t:{FRIDAY_8PM}:t> (Fri 5 Dec 2025 20:00 UTC) and <t:{FRIDAY_8PM}> (Fri 5 Dec 2025 20:00 UTC)"
    )
    later = dt.datetime(2025, 12, 5, 20, 5)
    assert readable_timestamps(f"<t:{FRIDAY_8PM}:R>", later) == f"<t:{FRIDAY_8PM}:R> (5 minutes ago)"


def test_relative_times_use_the_largest_whole_unit() -> None:
    at = dt.datetime(2025, 12, 5, 20)
    assert relative(at, at) == "now"
    assert relative(at, at - dt.timedelta(seconds=30)) == "in 30 seconds"
    assert relative(at, at - dt.timedelta(hours=1)) == "in 1 hour"
    assert relative(at, at + dt.timedelta(days=3)) == "3 days ago"
    assert relative(at, at - dt.timedelta(days=400)) == "in 1 year"


def test_text_that_only_looks_like_a_timestamp_is_left_as_it_is() -> None:
    now = dt.datetime(2025, 12, 5)
    for text in ("<t:abc:F>", "<t:123:X>", "<t:9999999999999999:F>", "t:123:F"):
        assert readable_timestamps(text, now) == text


def test_the_rehearsal_shows_start_placeholders_as_markup_and_readable_time(cli: Cli, tmp_path: Path) -> None:
    """``{start}`` and ``{start_relative}`` are filled in per run as Discord timestamps (what
    Discord is sent), each followed by what a reader would see: the run's start in UTC, and how
    long ago it was on the virtual clock (the second announcement comes after a 5-minute wait),
    in text, embeds and cues alike. ``--json`` keeps the content exactly as sent."""
    spec = event(
        "quiz",
        phase(
            "main",
            announce(
                "{title} starts {start} ({start_relative})",
                embed={"title": "Quiz", "description": "Doors open {start}"},
            ),
            cue("Begin the quiz (it began {start_relative})"),
            wait("5m"),
            announce("Round two; we began {start_relative}"),
        ),
        title="Quiz night",
    )
    path = write_yaml(tmp_path / "quiz.yaml", spec)
    result = cli("rehearse", path, "--cues", "confirm")
    assert result.code == 0, result.out + result.err
    first = re.search(r"Quiz night starts <t:(\d+):F> \((.+?)\) \(<t:(\d+):R> \((.+?)\)\)$", result.out, re.M)
    assert first is not None, result.out
    epoch, readable, same, words = first.groups()
    start = dt.datetime.fromtimestamp(int(epoch), dt.UTC)
    assert same == epoch
    clock = f"{start:%H:%M:%S}" if start.second else f"{start:%H:%M}"
    assert readable == f"{start:%a} {start.day} {start:%b %Y} {clock} UTC"
    assert words == "now", "the first step is sent as the run starts"
    assert f"┃ Doors open <t:{epoch}:F> ({readable})" in result.out
    assert f"│ Begin the quiz (it began <t:{epoch}:R> (now))" in result.out
    assert f"Round two; we began <t:{epoch}:R> (5 minutes ago)" in result.out

    records = [json.loads(line) for line in cli("rehearse", path, "--cues", "confirm", "--json").lines]
    contents = [r["content"] for r in records if r.get("kind") == "announce"]
    assert len(contents) == 2 and all(
        re.fullmatch(r"[^()]*<t:\d+:[FR]>[^()]*(\(<t:\d+:R>\))?", c) for c in contents
    )
