"""Issue 20, section 0, in Discord: a reminder's ``channel`` or ``ping_role`` typo passed
``/event validate``, ``/event publish`` and the ``/event start`` preflight, which walked only
the phases' steps, so it first failed when the reminder went out, an hour before the live event.
Driven through simcord, the real bot on a migrated SQLite database."""

from __future__ import annotations

from typing import Any

import pytest

from runner.views import list_runs
from tests.bot.conftest import Sim, raid_spec
from tests.bot.test_publish import NOTHING, answer, as_file, command, definitions_tables
from tests.bot.test_publish import pub as pub  # the fixture, under its own name

# Far beyond the ticker's look-ahead: no occurrence of it is created while the test runs.
FAR_OFF = {"once": "2031-06-06T20:00:00Z"}


def reminded_raid(*reminders: dict[str, Any], key: str = "reminded-raid") -> dict[str, Any]:
    """The shared raid, right for the bot's config in every step: only its reminders can be wrong."""
    return raid_spec(key=key, schedule=FAR_OFF, reminders=list(reminders))


TYPOS = (
    {"before": "1h", "channel": "anouncements", "content": "The raid starts in an hour"},
    {"before": "15m", "channel": "announcements", "content": "Fifteen minutes!", "ping_role": "playres"},
)


async def test_defect_reminder_alias_typo_passes_the_event_start_preflight(sim: Sim) -> None:
    """Before: ``/event start`` of a version with such reminders (published before this check,
    or from a machine without the config) found no problem. Now its preflight names each
    reminder's unknown alias at ``reminders.<index>``, and nothing starts until "Start anyway"."""
    await sim.publish(reminded_raid(*TYPOS))
    before = await list_runs(sim.engine)

    result = await sim.mod.slash(sim.staff, "event start", definition="reminded-raid")

    assert result.ephemeral
    embed = result.response.embeds[0]
    assert embed.title == "Preflight found 2 problem(s) in Harbour Raid"
    description = embed.description or ""
    assert (
        "• field 'reminders.0': channel 'anouncements' is not one of the channel aliases in config (channels)\n"
        in description
    ), description
    assert (
        "• field 'reminders.1': ping role 'playres' is not one of the role aliases in config" in description
    )
    assert [c["label"] for row in result.response.components for c in row["components"]] == ["Start anyway"]
    assert await list_runs(sim.engine) == before, "nothing starts while problems are unconfirmed"


async def test_the_event_start_preflight_passes_reminders_the_config_knows(sim: Sim) -> None:
    """The other half: right reminders add no problem, and the event starts at once."""
    await sim.publish(
        reminded_raid(
            {"before": "1h", "channel": "announcements", "content": "An hour!", "ping_role": "players"}
        )
    )
    result = await sim.mod.slash(sim.staff, "event start", definition="reminded-raid")
    assert result.acknowledged
    messages = [m.content for m in [result.response, *result.followups] if m is not None and m.content]
    assert any(content.startswith("✅ started Harbour Raid as run") for content in messages), messages


@pytest.mark.parametrize("verb", ["validate", "publish"])
async def test_defect_reminder_alias_typo_passes_event_validate_and_publish(pub: Sim, verb: str) -> None:
    """Before: the attachment was "valid" and publishable. Now both commands list each
    reminder's unknown alias, as the command line does, and store nothing."""
    before = await definitions_tables(pub.engine)

    reply = answer(await command(pub, verb, as_file(reminded_raid(*TYPOS), "raid.yaml")))

    outcome = NOTHING if verb == "publish" else "It would not publish."
    assert reply.content.startswith(f"❌ **raid.yaml**: 2 problems. {outcome}\n"), reply.content
    lines = reply.content.splitlines()[1:]
    assert lines[0].startswith(
        "• field 'reminders.0.channel': channel 'anouncements' is not one of the channel aliases"
    )
    assert lines[1].startswith(
        "• field 'reminders.1.ping_role': ping role 'playres' is not one of the role aliases"
    )
    assert reply.message.components == []
    assert await definitions_tables(pub.engine) == before
