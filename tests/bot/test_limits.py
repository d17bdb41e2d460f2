"""The bot's own messages stay within Discord's limits (simcord does not enforce them, so they
are checked here). That a definition breaking one is refused at validation is the actions'
rule: tests/actions/test_messaging.py."""

from __future__ import annotations

import datetime as dt

import discord

from actions import limits
from actions.delivery import Cue
from bot.cogs.control._render import status_embed
from bot.cogs.cues._render import cue_embed
from bot.cogs.staff_log._lines import batch_lines
from bot.discord_messages import nonce_for
from runner.kinds import Actor
from runner.views import PhaseView, RunView, StepContext, StepView


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
    step = StepView(
        1, "p", 0, "L" * 200, "gm.cue", "failed", False, now, 3, "E" * 500, Actor(None, "x"), None
    )
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
        Actor(None, "x"),
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
