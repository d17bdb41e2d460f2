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

from runner.definitions import EventDefinition
from tests.bot.conftest import Sim, buttons, make_config, raid_spec
from tests.bot.test_publish import PERMISSIONS, answer, definitions_tables, versions

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
        shown, {"title": "Harbour Raid Night", "when": "tomorrow 8pm", "channel": "announcements", "capacity": "8"}
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
