"""A control answers with a reason code; the front ends word it. Every code has words, in plain
text and in Discord, and the Discord answer fits a message whatever the facts behind it."""

from __future__ import annotations

import dataclasses
import re

import pytest

from actions import limits
from bot.rendering import control_answer
from runner.answers import Control, ControlResult, Reason
from runner.history import Actor
from runner.views import step_name
from wiring.control_text import control_text

LONG = "x" * 300
ALICE = Actor(id="123456789012345678", name="alice")


def worst(reason: Reason) -> ControlResult:
    """``reason`` with every fact as long as it can be: 500 runs started or in flight, 500
    scopes of the longest length, a cancel reason, a step label and a title longer than any."""
    many = tuple(range(10**17, 10**17 + 500))
    return ControlResult(
        ok=reason in OK,
        control=Control.SKIP,
        reason=reason,
        run_id=many[0],
        step_id=many[1],
        run_ids=many,
        run_status="cancelled",
        step_status="running",
        by=ALICE,
        definition_key="k" * 64,
        title=LONG,
        rehearsal=True,
        scope="s" * limits.SCOPE_MAX,
        scopes=tuple(f"{n:0{limits.SCOPE_MAX}}" for n in range(500)),
        busy=tuple((f"{n:0{limits.SCOPE_MAX}}", many[n]) for n in range(500)),
        label=LONG,
        cancel_reason=LONG,
        verb=LONG,
    )


OK = {
    Reason.STARTED,
    Reason.PAUSED,
    Reason.RESUMED,
    Reason.CANCELLED,
    Reason.RETRYING,
    Reason.CONFIRMED,
    Reason.SKIPPED,
}


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reason_has_words_and_its_discord_answer_fits_a_message(reason: Reason) -> None:
    result = worst(reason)
    text = control_text(result)
    assert text and text != f"{result.control}: {reason}", f"{reason} has no words of its own"
    answer = control_answer(result)
    assert 0 < len(answer) <= limits.CONTENT_MAX
    assert answer.startswith("✅ " if result.ok else "Nothing changed: ")


@pytest.mark.parametrize(
    ("result", "plain", "discord"),
    [
        (
            ControlResult(False, Control.CONFIRM, Reason.ALREADY_CONFIRMED, step_id=7, by=ALICE),
            "already confirmed by alice",
            "Nothing changed: already confirmed by <@123456789012345678>.",
        ),
        (
            ControlResult(False, Control.SKIP, Reason.ALREADY_SKIPPED, step_id=7, by=Actor(None, "cli")),
            "already skipped by cli",
            "Nothing changed: already skipped by cli.",
        ),
        (
            ControlResult(False, Control.PAUSE, Reason.RUN_ENDED, run_id=4, run_status="missed"),
            "cannot pause: the run was missed (it did not start within its grace window)",
            "Nothing changed: cannot pause: the run was missed (it did not start within its grace window).",
        ),
        (
            ControlResult(False, Control.RESUME, Reason.WRONG_RUN_STATUS, run_id=4, run_status="running"),
            "cannot resume: the run is running",
            "Nothing changed: cannot resume: the run is running.",
        ),
        (
            ControlResult(True, Control.SKIP, Reason.SKIPPED, run_id=4, step_id=7, run_status="paused"),
            "skipped; the run is paused and will carry on when resumed",
            "✅ skipped; the run is paused and will carry on when resumed",
        ),
        (
            ControlResult(
                True, Control.START, Reason.STARTED, run_id=5, run_ids=(5, 6), title="Raid", rehearsal=True
            ),
            "started rehearsal of Raid in 2 scopes: runs 5, 6",
            "✅ started rehearsal of Raid in 2 scopes: runs 5, 6",
        ),
        (
            ControlResult(False, Control.SKIP, Reason.NO_SUCH_STEP, step_id=9, run_id=3),
            "no such step: 9 in run 3",
            "Nothing changed: no such step: 9 in run 3.",
        ),
    ],
)
def test_a_reason_reads_the_same_in_both_front_ends_but_for_how_a_person_is_named(
    result: ControlResult, plain: str, discord: str
) -> None:
    assert control_text(result) == plain
    assert control_answer(result) == discord


@pytest.mark.parametrize(
    ("result", "named"),
    [
        (
            ControlResult(True, Control.RETRY, Reason.RETRYING, run_id=3, step_id=7, label="Open the gates"),
            "retrying {} of run 3",
        ),
        (ControlResult(False, Control.SKIP, Reason.NOT_A_CUE, step_id=7), "{} is not a GM cue"),
    ],
)
def test_an_answer_naming_a_step_names_it_as_step_name_does(result: ControlResult, named: str) -> None:
    """One numbering for steps (issue 12): an answer names a step by its id, the number
    ``/event skip`` takes and the status embed shows, with its label where it has one."""
    said = named.format(step_name(7, result.label))
    assert control_text(result) == said
    assert control_answer(result) in (f"✅ {said}", f"Nothing changed: {said}.")
    assert re.findall(r"\d+", said)[0] == "7", "the step's id, never its place in its phase"


def test_a_start_of_500_scopes_lists_what_fits_and_counts_the_rest() -> None:
    result = dataclasses.replace(worst(Reason.STARTED), ok=True, title="Raid")
    answer = control_answer(result)
    assert answer.startswith("✅ started rehearsal of Raid in 500 scopes: runs 100000000000000000, ")
    assert answer.endswith("more") and len(answer) <= limits.CONTENT_MAX


def test_the_code_is_what_a_log_line_or_a_failed_assertion_shows() -> None:
    result = ControlResult(False, Control.PAUSE, Reason.RUN_ENDED, run_id=4, run_status="cancelled")
    assert result.message == "pause: run_ended run_id=4 run_status='cancelled'"
    assert not result
