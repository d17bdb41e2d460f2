"""How a cue closed on an ended run is worded: from the history's data, one wording per medium."""

from __future__ import annotations

from runner.history import Actor, RunEnding
from wiring.control_text import closed_cue_text


def mention(actor: Actor) -> str:
    return f"<@{actor.id}>"


def test_a_cancel_names_who_cancelled_and_why_in_each_medium() -> None:
    ended = RunEnding("cancelled", by=Actor("123456789012345678", "alice"), why="storm")
    head = "the run was cancelled while this was being posted"
    assert closed_cue_text(ended) == f"{head} (cancelled by alice: storm)"
    assert closed_cue_text(ended, mention) == f"{head} (cancelled by <@123456789012345678>: storm)"


def test_a_run_ended_by_the_runner_gives_its_error_and_names_nobody() -> None:
    ended = RunEnding("failed", why="announce failed: missing access")
    assert closed_cue_text(ended) == (
        "the run was failed while this was being posted (announce failed: missing access)"
    )
    assert closed_cue_text(RunEnding("gone")) == "the run was gone while this was being posted"


def test_a_person_with_no_reason_is_still_named() -> None:
    ended = RunEnding("cancelled", by=Actor(None, "cli"))
    assert closed_cue_text(ended) == "the run was cancelled while this was being posted (cancelled by cli)"
