"""``discord.announce`` and ``gm.cue`` (actions/messaging.py): what they hand the delivery, how
they answer the runner, and the params they accept. Discord's limits are part of validation: a
definition that would break one is refused when it is validated (which publishing requires),
naming the phase and the step, never discovered when Discord refuses the message mid-event."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from actions import validation_registry
from actions.delivery import Announcement, Embed, EmbedField, RecordingDelivery
from actions.messaging import AnnounceParams, CueParams, EmbedParams, announce_action, cue_action, render
from runner import definitions
from runner.errors import DefinitionError
from runner.registry import Envelope
from runner.views import StepContext
from tests.support.definitions import announce, cue, event, phase, wait

CONTEXT = StepContext(
    event_key="raid",
    event_title="Harbour Raid",
    phase_key="muster",
    phase_label="Muster",
    step_index=1,
    step_label="Open the gates",
    scope="north",
    rehearsal=False,
)


def envelope(params: dict[str, Any], *, scope: str = "north", verify: bool = False) -> Envelope:
    return Envelope(
        actor=None, idempotency_key="k" * 40, params=params, run_id=7, scope=scope, step_id=9, verify=verify
    )


class Described:
    """The ``describe`` hook: answers a fixed context and counts its calls."""

    def __init__(self, context: StepContext | None = CONTEXT) -> None:
        self.context = context
        self.calls: list[tuple[int, int]] = []

    async def __call__(self, run_id: int, step_id: int) -> StepContext | None:
        self.calls.append((run_id, step_id))
        return self.context


# ── what the actions hand the delivery, and what they answer ────────────────


async def test_an_announcement_fills_in_the_scope_and_answers_where_it_went() -> None:
    delivery, describe = RecordingDelivery(), Described()
    raw = {
        "channel": "announcements",
        "content": "The invasion of {scope} begins",
        "ping_role": "players",
        "embed": {"title": "{scope} falls", "fields": [{"name": "Where", "value": "{scope} docks"}]},
    }
    answer = await announce_action(delivery, describe).perform(envelope(raw), AnnounceParams(**raw))
    assert delivery.announcements() == [
        Announcement(
            channel="announcements",
            content="The invasion of north begins",
            embed=Embed(title="north falls", fields=(EmbedField("Where", "north docks"),)),
            ping_role="players",
            idempotency_key="k" * 40,
            run_id=7,
            step_id=9,
            context=CONTEXT,
        )
    ]
    posted = delivery.sent[0].posted
    assert answer == {"ok": True, "output": {"posted": posted.as_dict()}}
    assert describe.calls == [(7, 9)]


async def test_a_cue_parks_the_step_until_a_gm_answers() -> None:
    delivery = RecordingDelivery()
    raw = {"instructions": "Open the {scope} gates", "title": "Gates of {scope}"}
    answer = await cue_action(delivery, Described()).perform(envelope(raw), CueParams(**raw))
    [sent] = delivery.cues()
    assert (sent.title, sent.instructions, sent.channel) == ("Gates of north", "Open the north gates", None)
    assert answer["await"] == "human" and answer["ok"] is True
    assert answer["output"] == {"posted": delivery.sent[0].posted.as_dict()}


@pytest.mark.parametrize(
    ("context", "title"),
    [(CONTEXT, "Open the gates"), (None, "GM cue")],
)
async def test_a_cue_without_a_title_is_titled_by_its_step_label_or_gm_cue(
    context: StepContext | None, title: str
) -> None:
    delivery = RecordingDelivery()
    raw = {"instructions": "Go"}
    await cue_action(delivery, Described(context)).perform(envelope(raw), CueParams(**raw))
    assert delivery.cues()[0].title == title


async def test_a_verify_checks_without_sending_and_answers_the_problems_for_good() -> None:
    """Preflight's verify dispatch: nothing is sent and no context is looked up; the problems
    a real delivery would hit come back as a terminal failure (retrying cannot fix them)."""
    delivery, describe = RecordingDelivery(known_channels={"announcements"}), Described()
    action = announce_action(delivery, describe)
    good = {"channel": "announcements", "content": "Hi"}
    bad = {"channel": "nowhere", "content": "Hi"}
    assert await action.perform(envelope(good, verify=True), AnnounceParams(**good)) == {"ok": True}
    answer = await action.perform(envelope(bad, verify=True), AnnounceParams(**bad))
    assert answer == {
        "ok": False,
        "retry": False,
        "error": "channel 'nowhere' does not exist",
        "problems": ["channel 'nowhere' does not exist"],
    }
    assert delivery.attempts == [] and describe.calls == []


@pytest.mark.parametrize("transient", [True, False])
async def test_a_delivery_error_is_answered_retryable_exactly_when_it_is_transient(transient: bool) -> None:
    delivery = RecordingDelivery()
    delivery.fail_next("503 from Discord", transient=transient)
    raw = {"instructions": "Go"}
    answer = await cue_action(delivery, Described()).perform(envelope(raw), CueParams(**raw))
    assert answer == {"ok": False, "retry": transient, "error": "503 from Discord"}
    assert "await" not in answer, "a cue that was not posted does not park"


def test_escaped_braces_render_as_literal_braces() -> None:
    assert render("{{scope}} is {scope}", "north") == "{scope} is north"
    assert render(None, "north") is None


# ── the params each action accepts ──────────────────────────────────────────


def test_an_embed_colour_is_hex_text_or_a_number() -> None:
    assert EmbedParams(title="t", colour="#ff8800").colour == 0xFF8800
    assert EmbedParams(title="t", colour="00ff00").colour == 0x00FF00
    assert EmbedParams(title="t", colour=255).colour == 255
    with pytest.raises(ValidationError, match=r'colour .orange. is not a colour: write it as "#RRGGBB"'):
        EmbedParams(title="t", colour="orange")
    with pytest.raises(ValidationError):
        EmbedParams(title="t", colour=0x1000000)


def test_an_empty_embed_or_an_empty_announcement_is_refused() -> None:
    with pytest.raises(ValidationError, match="an embed needs a title"):
        EmbedParams()
    with pytest.raises(ValidationError, match="needs content, an embed, or both"):
        AnnounceParams(channel="announcements")


@pytest.mark.parametrize("role", ["123456789012345678", "game masters", "@gm", "ｇｍ"])
def test_a_ping_role_is_a_role_alias_never_an_id_or_other_text(role: str) -> None:
    with pytest.raises(ValidationError):
        CueParams(instructions="Go", ping_role=role)
    assert CueParams(instructions="Go", ping_role="game-masters").ping_role == "game-masters"


@pytest.mark.parametrize("channel", ["announcements", "#announcements", "123456789012345678"])
def test_a_channel_is_an_alias_or_an_id(channel: str) -> None:
    assert AnnounceParams(channel=channel, content="x").channel == channel


def test_an_unknown_placeholder_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValidationError, match="content"):
        AnnounceParams(channel="announcements", content="Welcome {player}")


# ── Discord's limits, checked at validation (moved from tests/bot/test_limits.py) ──


def with_announcement(params: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """An event whose second phase's second step is the announcement under test."""
    return event(
        "raid",
        phase("muster", announce(), cue()),
        phase("finale", wait(), announce(**params)),
        **fields,
    )


def refused(spec: dict[str, Any]) -> list[Any]:
    with pytest.raises(DefinitionError) as caught:
        definitions.validate(spec, validation_registry())
    return caught.value.problems


def test_content_over_2000_characters_is_refused_naming_the_step() -> None:
    (problem,) = refused(with_announcement({"content": "x" * 2001}))
    assert (problem.phase, problem.step, problem.field) == ("finale", 1, "params.content")
    assert "2000" in problem.message
    assert str(problem).startswith("phase 'finale', 2nd step, field 'params.content'")
    definitions.validate(with_announcement({"content": "x" * 2000}), validation_registry())


def test_content_that_leaves_no_room_for_the_role_ping_is_refused() -> None:
    (problem,) = refused(with_announcement({"content": "x" * 1990, "ping_role": "players"}))
    assert (problem.phase, problem.step) == ("finale", 1)
    assert "with the role ping" in problem.message


def test_an_embed_with_26_fields_is_refused() -> None:
    fields = [{"name": f"f{i}", "value": "v"} for i in range(26)]
    (problem,) = refused(with_announcement({"content": None, "embed": {"title": "t", "fields": fields}}))
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
    spec = with_announcement(
        {"content": "{scope} " + "x" * 1980}, scopes=["a-rather-long-world-name-that-pushes-it-over"]
    )
    (problem,) = refused(spec)
    assert (problem.phase, problem.step) == ("finale", 1)
    assert "a-rather-long-world-name" in problem.message


def test_cue_instructions_over_4096_characters_are_refused() -> None:
    spec = event("raid", phase("muster", announce(), cue("i" * 4097)))
    (problem,) = refused(spec)
    assert (problem.phase, problem.step, problem.field) == ("muster", 1, "params.instructions")
