"""``/event validate`` and ``/event publish`` (issue 12): a YAML file attached to the command, in
simcord through the real bot, on a migrated SQLite database.

What is proven: a valid file's preview lists what changes and Publish stores a new version (which
``/event list`` then shows); an invalid file gets every problem, the ones the command line finds
for the same file and config; an identical file is "unchanged" with no button; too large, not
UTF-8, not YAML or not a mapping is a clear refusal; a member without ``publish`` is refused;
Cancel, a second member's press, an expired or pre-restart preview, and a preview the event has
moved on from all store nothing. Every case that must store nothing compares every row of the
definitions tables before and after.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import discord
import pytest
import simcord
import sqlalchemy as sa
import yaml
from simcord import assert_error
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.cogs.publishing._drafts import DRAFT_SECONDS
from bot.cogs.publishing._flow import MAX_UPLOAD_BYTES, PublishButton
from bot.errors import BotError
from cli.definitions import check_files
from runner.schema import metadata
from tests.bot.conftest import Sim, buttons, make_config, raid_spec
from tests.support.definitions import announce, cron, event, phase, step

PERMISSIONS = {
    "start": ["moderator"],
    "control": ["moderator"],
    "rehearse": ["moderator"],
    "cue": ["gm"],
    "publish": ["moderator"],
}
NOTHING = "Nothing was published."


@pytest.fixture
async def pub(sim: Sim) -> Sim:
    """The shared world, its bot restarted with ``publish`` granted to moderators, and a second
    moderator."""
    sim.config = make_config(sim.guild, sim.channels, sim.roles, permissions=PERMISSIONS)
    sim.mod2 = sim.guild.add_member(sim.env.create_user("mod2"), roles=[sim.roles["moderator"]])  # type: ignore[attr-defined]
    with sim.env.time_context():
        await sim.start_bot()
    return sim


def as_file(spec: dict[str, Any], name: str = "raid.yaml") -> tuple[str, bytes]:
    return name, yaml.safe_dump(spec, sort_keys=False, allow_unicode=True).encode()


async def command(
    sim: Sim, verb: str, file: tuple[str, bytes], member: simcord.MemberActor | None = None
) -> simcord.InteractionResult:
    return await (member or sim.mod).slash(sim.staff, f"event {verb}", file=file)


def answer(result: simcord.InteractionResult) -> simcord.ResponseMessage:
    """The command's one ephemeral answer (commands defer, then answer in a follow-up)."""
    assert result.acknowledged
    messages = [m for m in [result.response, *result.followups] if m is not None and m.content]
    assert messages, "no answer"
    assert all(m.ephemeral for m in messages)
    return messages[-1]


async def definitions_tables(engine: AsyncEngine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the definitions and versions tables (and of the runs, which a publish can
    re-point): what a refused or cancelled publish must leave as it was."""
    out = {}
    async with engine.connect() as conn:
        for name in ("event_definitions", "event_versions", "event_runs"):
            table = metadata.tables[name]
            out[name] = [tuple(r) for r in (await conn.execute(sa.select(table).order_by(table.c.id))).all()]
    return out


async def versions(engine: AsyncEngine, key: str = "raid") -> list[Any]:
    table = metadata.tables["event_versions"]
    definitions = metadata.tables["event_definitions"]
    query = (
        sa.select(table)
        .join(definitions, definitions.c.id == table.c.definition_id)
        .where(definitions.c.key == key)
        .order_by(table.c.version)
    )
    async with engine.connect() as conn:
        return list((await conn.execute(query)).all())


def changed_raid() -> dict[str, Any]:
    spec = raid_spec(title="Harbour Assault")
    spec["phases"].append(phase("retreat", announce("Back to the boats!", label="Sound the retreat")))
    spec["phases"][0]["steps"][1]["params"]["instructions"] = "Open the gates and the sluice."
    return spec


# ── a valid file ──────────────────────────────────────────────────────────


async def test_publish_previews_what_changes_and_the_publish_button_stores_a_new_version(pub: Sim) -> None:
    before = await definitions_tables(pub.engine)
    preview = answer(await command(pub, "publish", as_file(changed_raid())))
    assert preview.content.startswith("📝 **Harbour Assault** (`raid`): version 1 → 2, from raid.yaml\n")
    for line in (
        "• title: 'Harbour Raid' → 'Harbour Assault'",
        "• phase 'muster': step 'Open the gates': instructions changed",
        "• phase 'retreat' (Retreat): added, with 1 step",
        "Publish stores it as version 2; Cancel leaves everything as it is.",
    ):
        assert line in preview.content
    assert [label for label, _, disabled in buttons(preview.message) if not disabled] == ["Publish", "Cancel"]
    assert await definitions_tables(pub.engine) == before, "a preview stores nothing"

    pressed = await pub.mod.click(preview, label="Publish")
    assert pressed.acknowledged
    stored = await versions(pub.engine)
    assert [v.version for v in stored] == [1, 2]
    assert (stored[1].published_by, stored[1].source) == ("mod", "discord:raid.yaml")
    assert stored[1].spec["title"] == "Harbour Assault"
    shown = pressed.response
    assert shown is not None and shown.id == preview.id, "the preview itself says what happened"
    assert shown.content == "✅ Published **Harbour Assault** (`raid`) as version 2."
    assert [b["disabled"] for row in shown.components for b in row["components"]] == [True, True]

    listed = await pub.mod.slash(pub.staff, "event list")
    [embed] = [e for m in [listed.response, *listed.followups] if m is not None for e in m.embeds]
    published = embed.fields[0].value or ""
    assert "`raid` Harbour Assault — v2, manual" in published


async def test_a_new_event_says_new_event_and_publishes_version_1(pub: Sim) -> None:
    spec = event("quiz", phase("main", announce("Quiz time!", label="Open")), title="Quiz Night")
    preview = answer(await command(pub, "publish", as_file(spec, "quiz.yaml")))
    assert preview.content.startswith(
        "🆕 **Quiz Night** (`quiz`): a new event, from quiz.yaml\n1 phase, 1 step, no scopes, manual\n"
    )
    assert "Publish stores it as version 1" in preview.content
    assert await versions(pub.engine, "quiz") == []
    await pub.mod.click(preview, label="Publish")
    assert [v.version for v in await versions(pub.engine, "quiz")] == [1]


async def test_an_identical_file_is_unchanged_offers_no_publish_and_stores_nothing(pub: Sim) -> None:
    before = await definitions_tables(pub.engine)
    reply = answer(await command(pub, "publish", as_file(raid_spec())))
    assert reply.content == (
        "**Harbour Raid** (`raid`) is unchanged: nothing to publish (version 1, the current one, is "
        f"exactly this file). {NOTHING}"
    )
    assert reply.message.components == [], "no Publish button"
    assert await definitions_tables(pub.engine) == before


# ── files that do not publish ─────────────────────────────────────────────


def broken_spec() -> dict[str, Any]:
    """Four problems of structure: an empty phase, an unknown field, a phase key used twice and
    an action misspelt."""
    spec = raid_spec(colour="red")
    spec["phases"].append({"key": "muster", "label": "Again", "steps": []})
    spec["phases"][1]["steps"][1]["action"] = "discord.anounce"
    return spec


def unknown_aliases_spec() -> dict[str, Any]:
    """Valid in structure, but three names the bot's config does not have: only the check
    against the config finds them."""
    spec = raid_spec()
    spec["phases"][0]["steps"][0]["params"]["channel"] = "harbour-news"
    spec["phases"][0]["steps"][1]["params"]["ping_role"] = "captains"
    spec["phases"][1]["steps"][1]["params"]["channel"] = "docks"
    return spec


@pytest.mark.parametrize("verb", ["publish", "validate"])
@pytest.mark.parametrize("spec", [broken_spec, unknown_aliases_spec])
async def test_an_invalid_file_gets_every_problem_the_command_line_finds_and_stores_nothing(
    pub: Sim, tmp_path: Path, verb: str, spec: Any
) -> None:
    file = as_file(spec())
    path = tmp_path / "raid.yaml"
    path.write_bytes(file[1])
    # The command line's own check of the same file with the same config (in a thread: it runs
    # its own event loop for the aliases).
    [cli] = await asyncio.to_thread(check_files, [path], pub.config)
    assert len(cli.problems) >= 3
    before = await definitions_tables(pub.engine)

    reply = answer(await command(pub, verb, file))

    outcome = NOTHING if verb == "publish" else "It would not publish."
    assert reply.content.startswith(f"❌ **raid.yaml**: {len(cli.problems)} problems. {outcome}\n")
    lines = reply.content.splitlines()[1:]
    # Each line is the command line's own, without the file's name it starts with.
    printed = [str(p) for p in cli.problems]
    assert all(line.startswith(f"{path}, ") for line in printed), printed
    assert lines == [f"• {line.removeprefix(f'{path}, ')}" for line in printed]
    words = {
        broken_spec: ["unknown action 'discord.anounce'", "'colour'", "'muster' is used by an earlier phase"],
        unknown_aliases_spec: ["harbour-news", "captains", "docks"],
    }[spec]
    assert all(any(w in line for line in lines) for w in words), lines
    assert reply.message.components == []
    assert await definitions_tables(pub.engine) == before


async def test_every_problem_is_counted_when_they_do_not_fit_one_message(pub: Sim) -> None:
    spec = raid_spec()
    spec["phases"][0]["steps"] = [step("no.such.action", label=f"Step {n}") for n in range(120)]
    reply = answer(await command(pub, "publish", as_file(spec)))
    assert len(reply.content) <= 2000
    assert reply.content.startswith("❌ **raid.yaml**: 120 problems.")
    shown = reply.content.count("\n• ")
    assert shown > 5
    assert reply.content.endswith(f"… and {120 - shown} more")


UNREADABLE = {
    "too large": (
        b"# padding\n" * (MAX_UPLOAD_BYTES // 10 + 1),
        "raid.yaml is 256 KB; an event definition may be at most 256 KB. Nothing was stored.",
    ),
    "not UTF-8": (
        b"key: raid\ntitle: Caf\xe9\n",
        "raid.yaml cannot be read: line 2, column 11: the file is not UTF-8 text (byte 0xe9); save "
        "it as UTF-8. Nothing was stored.",
    ),
    "not YAML": (
        b"key: raid\ntitle: [unclosed\n",
        "raid.yaml is not valid YAML: line 3, column 1: YAML syntax error: expected ',' or ']', but "
        "got '<stream end>'. Nothing was stored.",
    ),
    "not a mapping": (
        b"- key: raid\n- title: Raid\n",
        "raid.yaml is not an event definition: it holds a list, where a definition is a mapping of "
        "fields (key: …, title: …, phases: …). Nothing was stored.",
    ),
    "empty": (
        b"# nothing yet\n",
        "raid.yaml is not an event definition: it holds nothing (the file is empty), where a "
        "definition is a mapping of fields (key: …, title: …, phases: …). Nothing was stored.",
    ),
}


@pytest.mark.parametrize("verb", ["publish", "validate"])
@pytest.mark.parametrize("kind", list(UNREADABLE))
async def test_a_file_that_cannot_be_read_is_refused_clearly_and_stores_nothing(
    pub: Sim, verb: str, kind: str
) -> None:
    data, words = UNREADABLE[kind]
    before = await definitions_tables(pub.engine)
    reply = answer(await command(pub, verb, ("raid.yaml", data)))
    assert reply.content == words
    assert_error(pub.env, BotError)
    assert reply.message.components == []
    assert await definitions_tables(pub.engine) == before


@pytest.mark.parametrize("verb", ["publish", "validate"])
async def test_a_member_without_the_publish_capability_is_refused_and_nothing_is_stored(
    pub: Sim, verb: str
) -> None:
    before = await definitions_tables(pub.engine)
    result = await command(pub, verb, as_file(changed_raid()), member=pub.gm)
    assert result.ephemeral and result.response is not None
    assert result.response.content == (
        "You need one of these roles to validate or publish event definitions: "
        f"<@&{pub.roles['moderator'].id}>. Nothing was done."
    )
    assert await definitions_tables(pub.engine) == before


# ── the buttons ───────────────────────────────────────────────────────────


async def test_cancel_stores_nothing_and_closes_the_preview(pub: Sim) -> None:
    before = await definitions_tables(pub.engine)
    preview = answer(await command(pub, "publish", as_file(changed_raid())))
    pressed = await pub.mod.click(preview, label="Cancel")
    assert pressed.response is not None and pressed.response.id == preview.id
    assert pressed.response.content == f"Cancelled **Harbour Assault** (`raid`). {NOTHING}"
    assert [b["disabled"] for row in pressed.response.components for b in row["components"]] == [True, True]
    assert await definitions_tables(pub.engine) == before
    # Its Publish, pressed after all (a copy of the button: the preview's own is disabled),
    # publishes nothing.
    late = await pub.mod.click(await copied(pub, preview, "publish"), label="Publish")
    assert late.response is not None
    assert late.response.content == f"This preview expired; run /event publish again. {NOTHING}"
    assert await definitions_tables(pub.engine) == before


def token_of(preview: simcord.ResponseMessage) -> str:
    [custom_id] = [i for _, i, _ in buttons(preview.message) if i and i.endswith(":publish")]
    return custom_id.split(":")[1]


async def copied(pub: Sim, preview: simcord.ResponseMessage, verb: str) -> discord.Message:
    """The preview's button, posted by the bot in the staff channel, where everyone can press
    it: as a member who copied its custom id would send it."""
    view = discord.ui.View(timeout=None)
    view.add_item(PublishButton(token_of(preview), verb))
    channel = pub.bot.get_channel(pub.staff.id)
    assert isinstance(channel, discord.TextChannel)
    await channel.send("copied", view=view)
    await pub.env.settle()
    return pub.staff.last_message


async def test_a_second_member_cannot_press_the_first_members_publish(pub: Sim) -> None:
    """In Discord only the asker sees the ephemeral preview; a copied custom id is refused all
    the same (here the bot posts the very button in a channel both can see)."""
    preview = answer(await command(pub, "publish", as_file(changed_raid())))
    copy_of_it = await copied(pub, preview, "publish")
    before = await definitions_tables(pub.engine)

    refused = await pub.mod2.click(copy_of_it, label="Publish")  # type: ignore[attr-defined]
    assert refused.ephemeral and refused.response is not None
    assert refused.response.content == (
        f"Only <@{pub.mod.id}>, who asked for this preview, can press its buttons. {NOTHING}"
    )
    assert await definitions_tables(pub.engine) == before
    # The asker's own press still works: the refusal used nothing up.
    await pub.mod.click(preview, label="Publish")
    assert [v.version for v in await versions(pub.engine)] == [1, 2]


async def test_publish_refuses_when_the_event_was_published_since_the_preview(pub: Sim) -> None:
    preview = answer(await command(pub, "publish", as_file(changed_raid())))
    with pub.env.time_context():
        await pub.publish(raid_spec(title="Harbour Raid, the sequel"))  # as python -m bot publish
    before = await definitions_tables(pub.engine)
    pressed = await pub.mod.click(preview, label="Publish")
    assert pressed.response is not None
    assert pressed.response.content.startswith(
        "The event changed since this preview (it is at version 2 now)"
    )
    assert await definitions_tables(pub.engine) == before


async def test_of_two_previews_of_one_version_only_the_first_pressed_publishes(pub: Sim) -> None:
    """Two moderators preview their own files against version 1; the second to press Publish
    would overwrite a version they never saw, so it is refused."""
    first = answer(await command(pub, "publish", as_file(changed_raid())))
    second = answer(await command(pub, "publish", as_file(raid_spec(title="Harbour Siege")), member=pub.mod2))  # type: ignore[attr-defined]
    assert "version 1 → 2" in first.content and "version 1 → 2" in second.content
    await pub.mod.click(first, label="Publish")
    pressed = await pub.mod2.click(second, label="Publish")  # type: ignore[attr-defined]
    assert pressed.response is not None
    assert pressed.response.content.startswith(
        "The event changed since this preview (it is at version 2 now)"
    )
    assert [v.spec["title"] for v in await versions(pub.engine)] == ["Harbour Raid", "Harbour Assault"]


async def test_a_preview_expires_after_its_time_and_with_the_process(pub: Sim) -> None:
    before = await definitions_tables(pub.engine)
    preview = answer(await command(pub, "publish", as_file(changed_raid())))
    await pub.env.advance_time(DRAFT_SECONDS + 1)
    expired = await pub.mod.click(preview, label="Publish")
    assert expired.response is not None
    assert expired.response.content == f"This preview expired; run /event publish again. {NOTHING}"

    second = answer(await command(pub, "publish", as_file(changed_raid())))
    with pub.env.time_context():
        await pub.start_bot()
    after_restart = await pub.mod.click(second, label="Publish")
    assert after_restart.response is not None
    assert after_restart.response.content == f"This preview expired; run /event publish again. {NOTHING}"
    assert await definitions_tables(pub.engine) == before


# ── /event validate ───────────────────────────────────────────────────────


async def test_validate_says_a_valid_file_is_valid_with_its_next_occurrences_and_stores_nothing(
    pub: Sim,
) -> None:
    spec = copy.deepcopy(raid_spec(schedule=cron("0 20 * * FRI", "Europe/London")))
    before = await definitions_tables(pub.engine)
    reply = answer(await command(pub, "validate", as_file(spec)))
    lines = reply.content.splitlines()
    assert lines[0] == (
        "✅ **raid.yaml** is valid: **Harbour Raid** (`raid`), 2 phases, 4 steps, no scopes, "
        "cron '0 20 * * FRI' in Europe/London"
    )
    assert lines[1].startswith("next: Fri ") and lines[1].endswith("(20:00 UTC)")
    assert len(lines) == 5 and lines[-1] == "Nothing was stored: /event publish publishes it."
    assert reply.message.components == []
    assert await definitions_tables(pub.engine) == before


async def test_validate_and_the_publish_preview_warn_of_options_past_the_overall_capacity(pub: Sim) -> None:
    signup = {"options": {"tank": 2, "dps": 6}, "capacity": 5, "channel": "announcements"}
    spec = copy.deepcopy(raid_spec(signup=signup))
    warning = "⚠️ signup: the options hold 8 seats together and the event 5"
    assert warning in answer(await command(pub, "validate", as_file(spec))).content
    assert warning in answer(await command(pub, "publish", as_file(spec))).content
