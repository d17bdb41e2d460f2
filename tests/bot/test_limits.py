"""Discord's limits are part of validation: a definition that would break one is refused when it
is validated (which publishing requires), naming the phase and the step, never discovered when
Discord refuses the message in the middle of a live event. simcord does not enforce these limits,
so they are checked here, and the bot's own messages are checked against them too."""

from __future__ import annotations

import datetime as dt
from typing import Any

import discord
import pytest

from actions import limits, validation_registry
from actions.delivery import Cue
from bot.cues import cue_embed
from bot.discord_delivery import nonce_for
from bot.rendering import batch_lines, status_embed
from runner import definitions
from runner.errors import DefinitionError
from runner.views import PhaseView, RunView, StepContext, StepView
from tests.bot.conftest import raid_spec


def with_announcement(params: dict[str, Any]) -> dict[str, Any]:
    spec = raid_spec()
    spec["phases"][1]["steps"][1]["params"] = {"channel": "announcements", **params}
    return spec


def refused(spec: dict[str, Any]) -> list[Any]:
    with pytest.raises(DefinitionError) as caught:
        definitions.validate(spec, validation_registry())
    return caught.value.problems


def test_content_over_2000_characters_is_refused_naming_the_step() -> None:
    (problem,) = refused(with_announcement({"content": "x" * 2001}))
    assert (problem.phase, problem.step, problem.field) == ("finale", 1, "params.content")
    assert "2000" in problem.message
    assert str(problem).startswith("phase 'finale', step 1, field 'params.content'")
    definitions.validate(with_announcement({"content": "x" * 2000}), validation_registry())


def test_content_that_leaves_no_room_for_the_role_ping_is_refused() -> None:
    (problem,) = refused(with_announcement({"content": "x" * 1990, "ping_role": "players"}))
    assert (problem.phase, problem.step) == ("finale", 1)
    assert "with the role ping" in problem.message


def test_an_embed_with_26_fields_is_refused() -> None:
    fields = [{"name": f"f{i}", "value": "v"} for i in range(26)]
    (problem,) = refused(with_announcement({"embed": {"title": "t", "fields": fields}}))
    assert (problem.phase, problem.step, problem.field) == ("finale", 1, "params.embed.fields")


@pytest.mark.parametrize(
    ("embed", "field"),
    [
        ({"title": "t" * 257}, "params.embed.title"),
        ({"description": "d" * 4097}, "params.embed.description"),
        ({"title": "t", "fields": [{"name": "n" * 257, "value": "v"}]}, "params.embed.fields.0.name"),
        ({"title": "t", "fields": [{"name": "n", "value": "v" * 1025}]}, "params.embed.fields.0.value"),
    ],
)
def test_each_embed_part_over_its_limit_is_refused(embed: dict[str, Any], field: str) -> None:
    (problem,) = refused(with_announcement({"embed": embed}))
    assert (problem.phase, problem.step, problem.field) == ("finale", 1, field)


def test_an_embed_over_6000_characters_in_all_is_refused() -> None:
    fields = [{"name": "n", "value": "v" * 1000} for _ in range(2)]
    embed = {"title": "t" * 256, "description": "d" * 4096, "fields": fields}
    (problem,) = refused(with_announcement({"embed": embed}))
    assert (problem.phase, problem.step, problem.field) == ("finale", 1, "params.embed")
    assert "6000" in problem.message


def test_text_that_only_breaks_a_limit_once_the_scope_is_filled_in_is_refused() -> None:
    spec = with_announcement({"content": "{scope} " + "x" * 1980})
    spec["scopes"] = ["a-rather-long-world-name-that-pushes-it-over"]
    (problem,) = refused(spec)
    assert (problem.phase, problem.step) == ("finale", 1)
    assert "a-rather-long-world-name" in problem.message


def test_cue_instructions_over_4096_characters_are_refused() -> None:
    spec = raid_spec()
    spec["phases"][0]["steps"][1]["params"]["instructions"] = "i" * 4097
    (problem,) = refused(spec)
    assert (problem.phase, problem.step, problem.field) == ("muster", 1, "params.instructions")


def test_the_nonce_fits_discords_25_characters() -> None:
    assert limits.NONCE_MAX == 25
    assert len(nonce_for("ab" * 20)) == 25


def test_the_largest_cue_a_definition_allows_fits_in_one_embed() -> None:
    """The cue embed adds the event, phase, step and scope to what the definition validated;
    at every part's maximum it is still within Discord's limits, with nothing clipped."""
    context = StepContext("k", "E" * 200, "p", "P" * 200, 98, "S" * 200, "s" * 190, True)
    cue = Cue(None, "T" * 256, "I" * 4096, "gm", "a" * 40, 10**12, 10**12, context)
    embed = cue_embed(cue)
    assert len(embed) <= limits.EMBED_TOTAL_MAX
    assert embed.description == "I" * 4096 and embed.title == "T" * 256


def test_the_status_embed_stays_within_discords_limits_for_any_run() -> None:
    """A run with 40 phases of 30 long steps each still renders as one valid embed."""
    now = dt.datetime(2026, 1, 1)
    step = StepView(1, "p", 0, "L" * 200, "gm.cue", "failed", False, now, 3, "E" * 500, "x", None)
    phases = [PhaseView(f"p{i}", "P" * 200, i == 3, [step] * 30) for i in range(40)]
    run = RunView(
        1,
        "k",
        "T" * 200,
        "s" * 190,
        "paused",
        "degraded",
        True,
        "p3",
        now,
        now,
        None,
        "x",
        "E" * 500,
        1,
        phases,
    )
    embed = status_embed(run)
    assert len(embed) <= limits.EMBED_TOTAL_MAX
    assert len(embed.fields) <= limits.EMBED_FIELDS_MAX
    assert len(embed.title or "") <= limits.EMBED_TITLE_MAX
    assert all(len(f.value or "") <= limits.EMBED_FIELD_VALUE_MAX for f in embed.fields)
    assert all(len(f.name or "") <= limits.EMBED_FIELD_NAME_MAX for f in embed.fields)
    assert isinstance(embed, discord.Embed)


def test_staff_log_lines_are_packed_within_the_content_limit() -> None:
    messages = batch_lines(["x" * 700] * 10 + ["y" * 2500])
    assert all(len(m) <= limits.CONTENT_MAX for m in messages)
    assert len(messages) == 6  # two 700-character lines a message, the long one clipped alone
