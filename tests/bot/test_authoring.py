"""``/event create``, ``/event edit`` and ``/event export`` (issue 28, item 1) in simcord, through
the real bot on a migrated SQLite database; every request is checked against Discord's OpenAPI
description by the simcord plugin.

What is proven: create from each bundled template opens a form, and its submit answers with the
start as a Discord timestamp, the YAML (shown and attached) and the same preview ``/event
publish`` gives, storing nothing until Publish, which stores version 1 of the filled-in event;
a time past or unreadable, a key taken, a channel the config lacks each refuse and store
nothing; edit prefills the form from the current version and makes a new version through the
same preview, and refuses a form opened on a version since replaced; export attaches YAML that
reads back as the current version; a member without the capability gets no form, no file, and
nothing changes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import simcord
import yaml
from simcord import assert_error

from bot.errors import BotError
from runner.definitions import EventDefinition
from tests.bot.conftest import Sim, buttons, make_config, raid_spec
from tests.bot.test_publish import PERMISSIONS, answer, definitions_tables, versions
from tests.support.definitions import announce, event, phase
from wiring.event_templates import TemplateError

ZONE = "Europe/Berlin"
NOTHING = "Nothing was published."


@pytest.fixture
async def auth(sim: Sim) -> Sim:
    """The shared world with ``publish`` granted to moderators and times read in Berlin."""
    sim.config = make_config(sim.guild, sim.channels, sim.roles, permissions=PERMISSIONS, timezone=ZONE)
    with sim.env.time_context():
        await sim.start_bot()
    return sim


async def open_form(
    sim: Sim, command: str, member: simcord.MemberActor | None = None, **options: Any
) -> simcord.InteractionResult:
    return await (member or sim.mod).slash(sim.staff, command, **options)


def inputs(shown: simcord.InteractionResult) -> dict[str, dict[str, Any]]:
    """The form's text inputs by custom id."""
    assert shown.modal is not None, "a form was shown"
    found = {}
    for row in shown.modal["components"]:
        for item in row.get("components") or [row.get("component")]:
            found[item["custom_id"]] = item
    return found


def timestamp(at: dt.datetime, style: str) -> str:
    return f"<t:{int(at.timestamp())}:{style}>"


def in_berlin(sim: Sim, days: int, hour: int) -> dt.datetime:
    """``days`` from the simulated today at ``hour``:00 Berlin time, aware."""
    import zoneinfo

    zone = zoneinfo.ZoneInfo(ZONE)
    today = sim.env.now().astimezone(zone).date() + dt.timedelta(days=days)
    return dt.datetime(today.year, today.month, today.day, hour, tzinfo=zone)


# ── create ────────────────────────────────────────────────────────────────


async def test_create_from_a_template_previews_time_yaml_and_changes_then_publish_stores_version_1(
    auth: Sim,
) -> None:
    shown = await open_form(auth, "event create", template="raid")
    fields = inputs(shown)
    assert list(fields) == ["title", "when", "channel", "capacity", "key"]
    assert fields["channel"].get("value") == "announcements", "the template's defaults prefill the form"
    before = await definitions_tables(auth.engine)

    submitted = await auth.mod.submit_modal(
        shown,
        {"title": "Harbour Raid Night", "when": "tomorrow 8pm", "channel": "announcements", "capacity": "8"},
    )
    preview = answer(submitted)
    at = in_berlin(auth, 1, 20)
    assert preview.content.startswith(
        f"🕗 “tomorrow 8pm” is {timestamp(at, 'F')} ({timestamp(at, 'R')})\n"
        "🆕 **Harbour Raid Night** (`harbour-raid-night`): a new event, from template raid\n"
    )
    assert [label for label, _, disabled in buttons(preview.message) if not disabled] == ["Publish", "Cancel"]
    [embed] = preview.embeds
    assert embed.title == "harbour-raid-night.yaml"
    assert embed.description is not None and "capacity: 8" in embed.description
    [file] = preview.attachments
    assert file.filename == "harbour-raid-night.yaml"
    assert await definitions_tables(auth.engine) == before, "nothing is stored before Publish"

    await auth.mod.click(preview, label="Publish")
    [stored] = await versions(auth.engine, "harbour-raid-night")
    assert (stored.version, stored.source, stored.published_by) == (1, "discord:template raid", "mod")
    definition = EventDefinition.model_validate(stored.spec)
    assert definition.signup is not None and definition.signup.capacity == 8
    assert definition.schedule.at == at  # type: ignore[union-attr]


@pytest.mark.parametrize("template", ["announcement", "quiz-night", "raid", "live-event"])
async def test_every_bundled_template_makes_an_event_that_previews_and_publishes(
    auth: Sim, template: str
) -> None:
    shown = await open_form(auth, "event create", template=template)
    values = {"title": f"Our {template}", "when": "2026-12-12 20:00", "channel": "announcements"}
    if "capacity" in inputs(shown):
        values["capacity"] = "12"
    preview = answer(await auth.mod.submit_modal(shown, values))
    assert (
        f"🆕 **Our {template}** (`our-{template}`): a new event, from template {template}" in preview.content
    )
    await auth.mod.click(preview, label="Publish")
    assert [v.version for v in await versions(auth.engine, f"our-{template}")] == [1]


async def refused(sim: Sim, shown: simcord.InteractionResult, values: dict[str, str]) -> str:
    """Submit the form; the answer, once it is certain that nothing was stored."""
    before = await definitions_tables(sim.engine)
    reply = answer(await sim.mod.submit_modal(shown, values))
    assert await definitions_tables(sim.engine) == before
    assert reply.message.components == [], "no Publish button"
    return reply.content


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("2020-01-01 20:00", "“2020-01-01 20:00” is 2020-01-01 20:00 Europe/Berlin, which has passed"),
        ("someday soon", "“someday soon” is not a time I can read"),
    ],
)
async def test_a_time_past_or_unreadable_is_refused_naming_what_was_typed(
    auth: Sim, when: str, says: str
) -> None:
    shown = await open_form(auth, "event create", template="announcement")
    text = await refused(auth, shown, {"title": "Market day", "when": when, "channel": "announcements"})
    assert says in text


async def test_a_key_already_taken_is_refused_pointing_at_edit(auth: Sim) -> None:
    shown = await open_form(auth, "event create", template="announcement")
    text = await refused(
        auth, shown, {"title": "Raid", "when": "in 2h", "channel": "announcements", "key": "raid"}
    )
    assert text == (
        f"There is already an event `raid`: /event edit event:raid changes it, or give this one another key. {NOTHING}"
    )


async def test_a_channel_the_config_lacks_gets_the_problems_publish_would_list(auth: Sim) -> None:
    shown = await open_form(auth, "event create", template="announcement")
    text = await refused(auth, shown, {"title": "Market day", "when": "in 2h", "channel": "anouncements"})
    assert text.startswith(f"❌ **market-day.yaml**: 1 problem. {NOTHING}\n")
    assert "anouncements" in text and "announcements" in text, "it names the typo and what was meant"


async def test_a_capacity_that_is_not_a_number_is_refused(auth: Sim) -> None:
    shown = await open_form(auth, "event create", template="raid")
    text = await refused(
        auth, shown, {"title": "Raid two", "when": "in 2h", "channel": "announcements", "capacity": "lots"}
    )
    assert text == f"Capacity “lots” is not a whole number from 1 to 1000. {NOTHING}"


async def test_an_unknown_template_is_refused_listing_the_templates(auth: Sim) -> None:
    result = await open_form(auth, "event create", template="picnic")
    assert result.modal is None
    assert answer(result).content == (
        "There is no template 'picnic'; the templates are: announcement, live-event, quiz-night, raid."
    )
    assert_error(auth.env, TemplateError)


async def test_a_form_still_works_after_a_restart_and_is_checked_against_the_config_then(auth: Sim) -> None:
    shown = await open_form(auth, "event create", template="announcement")
    values = {"title": "Market day", "when": "in 2h", "channel": "announcements"}
    with auth.env.time_context():
        await auth.start_bot()
    assert "🆕 **Market day**" in answer(await auth.mod.submit_modal(shown, values)).content
    # Restarted once more with publish taken from moderators: the same form is now refused.
    shown = await open_form(auth, "event create", template="announcement")
    auth.config = make_config(
        auth.guild, auth.channels, auth.roles, permissions={**PERMISSIONS, "publish": ["gm"]}
    )
    with auth.env.time_context():
        await auth.start_bot()
    text = await refused(auth, shown, values)
    assert text.startswith("You need one of these roles to validate or publish event definitions")


# ── edit ──────────────────────────────────────────────────────────────────


async def test_edit_prefills_the_current_fields_and_publishes_a_new_version_after_the_preview(
    auth: Sim,
) -> None:
    shown = await open_form(auth, "event edit", event="raid")
    fields = inputs(shown)
    assert list(fields) == ["title", "when", "channel"], "no sign-ups: no capacity to ask"
    assert (fields["title"].get("value"), fields["channel"].get("value")) == ("Harbour Raid", "announcements")
    assert fields["when"].get("value") in (None, ""), "started by hand: no time yet"

    values = {"title": "Harbour Raid II", "when": "friday 20:00", "channel": "general"}
    preview = answer(await auth.mod.submit_modal(shown, values))
    assert "📝 **Harbour Raid II** (`raid`): version 1 → 2, from /event edit" in preview.content
    assert "• title: 'Harbour Raid' → 'Harbour Raid II'" in preview.content
    assert "🕗 “friday 20:00” is <t:" in preview.content
    assert len(await versions(auth.engine)) == 1, "nothing stored before Publish"

    await auth.mod.click(preview, label="Publish")
    stored = await versions(auth.engine)
    assert [v.version for v in stored] == [1, 2]
    assert stored[1].source == "discord:/event edit"
    edited = EventDefinition.model_validate(stored[1].spec)
    channels = {
        s.params.get("channel") for p in edited.phases for s in p.steps if s.action == "discord.announce"
    }
    assert channels == {"general"}


async def test_an_edit_form_opened_before_the_event_was_published_again_is_refused(auth: Sim) -> None:
    shown = await open_form(auth, "event edit", event="raid")
    await auth.publish(raid_spec(title="Harbour Raid, retold"))
    text = await refused(auth, shown, {"title": "Mine", "when": "", "channel": "announcements"})
    assert text == (
        f"`raid` was published again since this form opened (it is at version 2 now): run /event edit again. {NOTHING}"
    )


async def test_edit_of_an_event_that_does_not_exist_is_refused(auth: Sim) -> None:
    result = await open_form(auth, "event edit", event="nope")
    assert result.modal is None
    assert answer(result).content == "There is no published event `nope`; /event list shows them."
    assert_error(auth.env, BotError)


# ── export ────────────────────────────────────────────────────────────────


async def test_export_attaches_yaml_that_reads_back_as_the_current_version(auth: Sim) -> None:
    await auth.publish(raid_spec(title="Harbour Raid, retold"))
    reply = answer(await auth.mod.slash(auth.staff, "event export", event="raid"))
    assert reply.content.startswith("📄 **Harbour Raid, retold** (`raid`), version 2: its YAML is attached.")
    [file] = reply.attachments
    assert file.filename == "raid.yaml"
    text = (await file.read()).decode()
    [_, current] = await versions(auth.engine)
    assert EventDefinition.model_validate(yaml.safe_load(text)).content_hash() == current.content_hash


# ── who may ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("event create", {"template": "raid"}),
        ("event edit", {"event": "raid"}),
        ("event export", {"event": "raid"}),
    ],
)
async def test_a_member_without_the_capability_gets_no_form_no_file_and_nothing_changes(
    auth: Sim, command: str, options: dict[str, str]
) -> None:
    before = await definitions_tables(auth.engine)
    result = await auth.player.slash(auth.staff, command, **options)
    assert result.modal is None
    reply = answer(result)
    assert reply.attachments == []
    assert reply.content.startswith("You need one of these roles to ") and reply.content.endswith(
        "Nothing was done."
    )
    assert await definitions_tables(auth.engine) == before


def test_python_m_bot_sync_publishes_create_edit_and_export_under_event() -> None:
    from bot.app import event_commands

    names = {command.name for command in event_commands().commands}
    assert {"create", "edit", "export", "publish"} <= names


async def test_edit_of_a_sign_up_event_on_a_cron_schedule_asks_its_capacity_and_not_its_time(
    auth: Sim,
) -> None:
    spec = raid_spec(
        schedule={"cron": "0 19 * * SAT", "timezone": ZONE},
        signup={"channel": "announcements", "options": ["tank", "dps"], "capacity": 10},
    )
    await auth.publish(spec)
    shown = await open_form(auth, "event edit", event="raid")
    fields = inputs(shown)
    assert list(fields) == ["title", "channel", "capacity"], "a cron schedule is changed in the YAML"
    assert fields["capacity"].get("value") == "10"
    preview = answer(
        await auth.mod.submit_modal(
            shown, {"title": "Harbour Raid", "channel": "announcements", "capacity": "6"}
        )
    )
    assert "version 2 → 3" in preview.content and "🕗" not in preview.content
    await auth.mod.click(preview, label="Publish")
    latest = EventDefinition.model_validate((await versions(auth.engine))[-1].spec)
    assert latest.signup is not None and latest.signup.capacity == 6
    assert latest.schedule.kind == "cron"


async def test_a_long_event_still_answers_within_discords_limits_with_its_yaml_attached(auth: Sim) -> None:
    long_title = "The Very Long Harbour Festival " + "x" * 169
    spec = event(
        "festival",
        phase(
            "all",
            *[announce(f"Act {n}: " + "🎉 the harbour sings. " * 12, label=f"Act {n}") for n in range(40)],
        ),
        title=long_title,
    )
    await auth.publish(spec)
    shown = await open_form(auth, "event edit", event="festival")
    preview = answer(
        await auth.mod.submit_modal(shown, {"title": long_title[:-1] + "y", "channel": "general"})
    )
    exported = answer(await auth.mod.slash(auth.staff, "event export", event="festival"))
    for reply in (preview, exported):
        assert len(reply.content) <= 2000
        [embed] = reply.embeds
        assert len(embed.description or "") <= 4096 and len(embed) <= 6000
        assert "too long to show here, see the attached file" in (embed.description or "")
        [file] = reply.attachments
        assert file.filename == "festival.yaml" and file.size > 4096


async def test_an_operators_template_folder_is_offered_and_used_without_a_restart(
    auth: Sim, tmp_path: Any
) -> None:
    auth.config = make_config(
        auth.guild,
        auth.channels,
        auth.roles,
        permissions=PERMISSIONS,
        timezone=ZONE,
        templates_dir=str(tmp_path),
    )
    with auth.env.time_context():
        await auth.start_bot()
    offered = await auth.mod.autocomplete(auth.staff, "event create", "template", "")
    assert [c["value"] for c in offered] == ["announcement", "live-event", "quiz-night", "raid"]
    (tmp_path / "market.yaml").write_text(
        "template: {description: Market day in the harbour, defaults: {channel: general}}\n"
        'key: ${key}\ntitle: ${title}\nschedule: {once: "${when}"}\n'
        "phases: [{key: open, label: Open, steps: [{action: discord.announce, "
        'params: {channel: "${channel}", content: "The market is open!"}}]}]\n',
        encoding="utf-8",
    )
    offered = await auth.mod.autocomplete(auth.staff, "event create", "template", "market")
    assert offered == [{"name": "market: Market day in the harbour", "value": "market"}]
    shown = await open_form(auth, "event create", template="market")
    assert list(inputs(shown)) == ["title", "when", "channel", "key"]
    preview = answer(
        await auth.mod.submit_modal(shown, {"title": "Market", "when": "in 3h", "channel": "general"})
    )
    assert "🆕 **Market** (`market`): a new event, from template market" in preview.content
