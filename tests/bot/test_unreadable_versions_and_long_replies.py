"""Regression tests for the bot's replies and shared services (issue 8): defect 4 (one unreadable
definition stopped the staff log, ``/event list`` and ``/event status``) and defect 9 (replies
over Discord's limits). Driven through simcord against the real bot from ``create_bot``."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from simcord import assert_error, assert_responded
from sqlalchemy.ext.asyncio import AsyncEngine

from actions import limits, validation_registry
from bot.errors import APOLOGY
from cli import main
from runner import catalog, definitions, schema
from runner.db import create_engine
from runner.errors import UnknownDefinition, UnreadableDefinition
from runner.history import Actor
from runner.views import list_runs
from tests.bot.conftest import TICK, Sim, raid_spec
from tests.support.definitions import event, phase, wait

# A field the definition format once allowed and today's rules refuse (``extra="forbid"``).
RETIRED_FIELD = "retired_option"
REASON = f"{RETIRED_FIELD}: Extra inputs are not permitted"


def lighthouse_spec() -> dict[str, Any]:
    return raid_spec(key="legacy", title="Lighthouse Night")


async def write_unreadable_version(engine: AsyncEngine, now: dt.datetime, **changes: Any) -> tuple[int, int]:
    """Publish ``legacy``, then write its version 2 by hand with a body today's validator refuses
    (a retired field, or ``changes``), point the event at it, and create a run pinned to it, as
    an older bot would have. Answers the hand-written version's id and the run's id."""
    valid = definitions.validate(lighthouse_spec(), validation_registry())
    published = await catalog.publish(engine, valid, now, actor=Actor(None, "test"))
    body = {**valid.model_dump(mode="json"), **(changes or {RETIRED_FIELD: "kept from an older format"})}
    async with engine.begin() as conn:
        inserted = await conn.execute(
            sa.insert(schema.versions).values(
                definition_id=published.definition_id,
                version=2,
                content_hash="0" * 64,
                spec=body,
                source="edited by hand",
                published_by="hand",
                published_at=now,
            )
        )
        version_id = int(inserted.inserted_primary_key[0])
        await conn.execute(
            sa.update(schema.definitions)
            .where(schema.definitions.c.id == published.definition_id)
            .values(current_version_id=version_id)
        )
        # The parsed body is the valid one: only the stored row is unreadable, as it would be
        # for a run created before the rules changed.
        pinned = catalog.CurrentDefinition(published.definition_id, version_id, valid)
        run_id = await catalog.create_run(conn, pinned, "", now, now, actor=Actor(None, "schedule"))
    assert run_id is not None
    return version_id, run_id


def unreadable_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "runner.catalog" and RETIRED_FIELD in r.getMessage()]


# ── defect 4: one unreadable definition stops a shared service ──────────────


async def test_defect_04_an_unreadable_definition_does_not_stop_the_staff_log(
    sim: Sim, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the staff log read every run's definition to word its lines; the one it could not
    parse raised out of the pass, so its cursor never moved and nothing more was posted for
    any event, with a traceback every pass. Now: the unreadable run's line is posted with what
    the tables know (its title, its number), every other event's lines are posted, and the
    unreadable version is logged once, with the reason, however many passes meet it."""
    _, bad_run = await write_unreadable_version(sim.engine, sim.now())
    await sim.env.advance_time(TICK * 2)  # the tick meets the bad run; the staff log passes
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    await sim.env.advance_time(TICK * 4)

    lines = [m.content for m in sim.staff_log.history()]
    assert any("**Lighthouse Night**" in line and f"run {bad_run} started" in line for line in lines), lines
    assert any("**Harbour Raid**" in line and "started by <@" in line for line in lines), lines
    (warning,) = unreadable_warnings(caplog)
    assert REASON in warning.getMessage()
    assert "'legacy' version 2 cannot be read" in warning.getMessage()


async def test_defect_04_list_status_and_start_show_an_unreadable_definition_with_its_reason(
    sim: Sim,
) -> None:
    """Before: ``/event list`` and ``/event status`` of the run answered with the apology: one
    stored version (here with a schedule in a shape today's rules do not know) failed to parse.
    Now: both answer; the bad event and its run are marked unreadable with the reason, every
    other event and run is shown as before; starting the bad event is refused in words that say
    why, and autocomplete still offers it, marked."""
    version_id, bad_run = await write_unreadable_version(sim.engine, sim.now(), schedule="fortnightly")
    reason = "schedule: Input should be a valid dictionary or object to extract fields from"
    await sim.env.advance_time(TICK * 2)
    await sim.mod.slash(sim.staff, "event start", definition="raid")
    raid_run = bad_run + 1

    listed = await sim.mod.slash(sim.staff, "event list")
    assert listed.response.content != APOLOGY
    published, in_flight = listed.response.embeds[0].fields
    assert f"`legacy` Lighthouse Night — v2, ⚠️ unreadable: {reason}" in published.value
    assert "`raid` Harbour Raid — v1, manual" in published.value
    in_flight_lines = in_flight.value.splitlines()
    assert f"`{raid_run}` Harbour Raid — running" in in_flight_lines
    assert any(
        line.startswith(f"`{bad_run}` Lighthouse Night — ") and line.endswith("· ⚠️ definition unreadable")
        for line in in_flight_lines
    ), in_flight_lines

    status = (await sim.mod.slash(sim.staff, "event status", run=bad_run)).response.embeds[0]
    assert status.title == f"Lighthouse Night · run {bad_run}"
    assert f"Its definition (version id {version_id}) cannot be read: {reason}" in status.description
    assert [f.name for f in status.fields] == ["muster"], "the steps it has, under their phase's key"
    raid_status = (await sim.mod.slash(sim.staff, "event status", run=raid_run)).response.embeds[0]
    assert "Status: **running**" in raid_status.description
    assert "cannot be read" not in raid_status.description

    started = await sim.mod.slash(sim.staff, "event start", definition="legacy")
    assert_responded(
        started,
        content=f"the stored definition 'legacy' version 2 cannot be read: {reason}",
        ephemeral=True,
    )
    assert_error(sim.env, UnreadableDefinition)
    offered = await sim.mod.autocomplete(sim.staff, "event start", "definition", "")
    assert {"name": "Lighthouse Night (legacy) · unreadable", "value": "legacy"} in offered
    assert {"name": "Harbour Raid (raid)", "value": "raid"} in offered
    assert await sim.mod.autocomplete(sim.staff, "event start", "scope", "", definition="legacy") == []


def test_defect_04_cli_runs_names_a_run_whose_definition_is_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``runs`` listed the run as in flight with no error, so nothing told staff why it
    never moved (the runner leaves a run it cannot read alone). Now: its row says the definition
    is unreadable and why, and every other run is listed as before."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'events.sqlite3'}"
    assert main(["migrate", "--database", url]) == 0

    async def setup() -> int:
        engine = create_engine(url)
        try:
            now = dt.datetime(2026, 12, 1, 20, 0)
            good = definitions.validate(raid_spec(), validation_registry())
            published = await catalog.publish(engine, good, now)
            current = catalog.CurrentDefinition(published.definition_id, published.version_id, good)
            async with engine.begin() as conn:
                await catalog.create_run(conn, current, "", now, now, actor=Actor(None, "test"))
            return (await write_unreadable_version(engine, now))[1]
        finally:
            await engine.dispose()

    bad_run = asyncio.run(setup())
    capsys.readouterr()
    assert main(["runs", "--database", url]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["ID", "EVENT"]
    # The last line counts them (scheduled apart from under way); the rows are the rest.
    *rows, summary = lines
    assert summary.startswith("2 runs: 2 scheduled")
    by_id = {row.split()[0]: row for row in rows}
    assert set(by_id) == {"1", str(bad_run)}
    assert f"definition unreadable: {REASON}"[:60] in by_id[str(bad_run)]
    assert "unreadable" not in by_id["1"]


# ── defect 9: replies over Discord's limits ──────────────────────────────────


def wait_only_spec(key: str, title: str, scopes: list[str]) -> dict[str, Any]:
    return event(key, phase("watch", wait(3600)), title=title, scopes=scopes)


def counted(text: str, pattern: str) -> tuple[int, int]:
    """How many items ``text`` shows (``pattern`` matches one) and how many it says are left."""
    more = re.search(r"… and (\d+) more", text)
    assert more is not None, text
    return len(re.findall(pattern, text)), int(more.group(1))


async def test_defect_09_starting_500_scopes_answers_with_a_short_summary(sim: Sim) -> None:
    """Before: ``/event start`` of a 500-scope event started all 500 runs, then told the
    moderator "Something went wrong": the answer listing 500 run ids was over Discord's 2,000
    characters. ``/event list`` then failed the same way (its in-flight field was allowed 4,096
    characters, where a field holds 1,024). Now: the answer lists the runs that fit and counts
    the rest; the list, the status and a second start's refusal (every scope in flight) fit
    too."""
    await sim.publish(wait_only_spec("beacons", "Beacon Watch", [f"beacon-{i:03d}" for i in range(500)]))
    # The answer is what is tested, not the engine carrying out 500 runs (minutes on SQLite on a
    # busy machine, which simcord would wait for after each action): the tick loop is stopped.
    assert sim.bot.ticker is not None
    await sim.bot.ticker.stop()
    result = await sim.mod.slash(sim.staff, "event start", definition="beacons")

    text = result.response.content
    assert text != APOLOGY
    assert len(text) <= limits.CONTENT_MAX
    assert text.startswith("✅ started Beacon Watch in 500 scopes: runs 1, 2, 3, ")
    shown, left = counted(text, r"\b\d+(?=,| …)")
    assert shown + left == 500 and left > 0
    assert len(await list_runs(sim.engine, limit=1000)) == 500, "every run was started"

    listed = await sim.mod.slash(sim.staff, "event list")
    in_flight = listed.response.embeds[0].fields[1].value
    assert len(in_flight) <= limits.EMBED_FIELD_VALUE_MAX
    shown, left = counted(in_flight, r"(?m)^`\d+` Beacon Watch")
    assert shown + left == 50, "the 50 newest runs in flight the list reads, each shown or counted"
    status = await sim.mod.slash(sim.staff, "event status")
    assert len(status.response.embeds[0].description) <= limits.EMBED_DESCRIPTION_MAX

    again = await sim.mod.slash(sim.staff, "event start", definition="beacons")
    text = again.response.content
    assert text.startswith("Nothing changed: beacons is already in flight: beacon-000 (run 1), ")
    assert len(text) <= limits.CONTENT_MAX
    assert len(await list_runs(sim.engine, limit=1000)) == 500, "the refused start started nothing"


async def test_defect_09_a_wrong_scope_among_many_long_scopes_gets_a_fitting_refusal(sim: Sim) -> None:
    """Before: a scope the event does not have was refused with every scope listed; with 40
    scopes of 190 characters that was 7,600 characters, Discord refused it, and the moderator
    got the apology. Now: the refusal names as many scopes as fit and counts the rest, and
    nothing starts."""
    scopes = [f"world-{i:02d}-" + "x" * 181 for i in range(40)]
    await sim.publish(wait_only_spec("worlds", "Many Worlds", scopes))
    result = await sim.mod.slash(sim.staff, "event start", definition="worlds", scope="atlantis")

    text = result.response.content
    assert result.ephemeral
    assert len(text) <= limits.CONTENT_MAX
    assert text.startswith("Nothing changed: worlds has no scope 'atlantis'; its scopes are: world-00-xxx")
    assert text.endswith(" more.")
    shown, left = counted(text, r"world-\d\d-")
    assert shown + left == 40 and shown > 0
    assert await list_runs(sim.engine) == []


async def test_defect_09_a_3000_character_definition_name_gets_an_answer(sim: Sim) -> None:
    """Before: the refusal quoted the 3,000-character name, was over Discord's 2,000 characters,
    and the error boundary's own reply failed, so the moderator got no answer at all (the
    commands declare no length for these options, and Discord lets a string option carry up to
    6,000 characters). Now: the boundary fits every reply to the limit."""
    for command in ("event start", "event rehearse"):
        result = await sim.mod.slash(sim.staff, command, definition="q" * 3000)
        assert result.ephemeral, command
        text = result.response.content
        assert text.startswith("no published event is called 'qqqq"), command
        assert len(text) <= limits.CONTENT_MAX and text.endswith("…"), command
        assert_error(sim.env, UnknownDefinition)
    # A string option may carry up to 6,000 characters; a scope that long is refused in a reply
    # that quotes only the start of it.
    result = await sim.mod.slash(sim.staff, "event start", definition="raid", scope="z" * 6000)
    assert result.response.content == (
        f"Nothing changed: raid has no scope {'z' * 99 + '…'!r}; its scopes are: none (leave the scope empty)."
    )
    assert await list_runs(sim.engine) == []


async def test_defect_09_a_150_character_scope_offered_by_autocomplete_round_trips_and_starts(
    sim: Sim,
) -> None:
    """Before: autocomplete offered a 150-character scope with its value cut to 100 characters
    (Discord's limit), and the command then refused that value as an unknown scope. Now: a
    scope too long for a value is offered as a short stable token that the command maps back,
    and picking it starts that scope; a scope that fits is still sent as itself."""
    sunken = "the-sunken-city-of-" + "y" * 131
    await sim.publish(wait_only_spec("tides", "Tidewatch", [sunken, "shallows"]))

    offered = await sim.mod.autocomplete(sim.staff, "event start", "scope", "", definition="tides")
    assert all(len(c["name"]) <= 100 and len(c["value"]) <= 100 for c in offered), offered
    assert [c["value"] for c in offered][1] == "shallows"
    (choice,) = await sim.mod.autocomplete(sim.staff, "event start", "scope", "sunken", definition="tides")
    assert choice["value"] != sunken[:100], "not a cut-off name the command would not know"

    result = await sim.mod.slash(sim.staff, "event start", definition="tides", scope=choice["value"])
    assert_responded(result, content="✅ started Tidewatch as run 1", ephemeral=True)
    assert (await sim.run(1)).scope == sunken
    rehearsed = await sim.mod.slash(sim.staff, "event rehearse", definition="tides", scope=choice["value"])
    assert_responded(rehearsed, content="✅ started rehearsal of Tidewatch as run 2", ephemeral=True)
    assert (await sim.run(2)).scope == sunken


async def test_defect_09_the_error_boundary_never_raises_when_the_interaction_has_expired(
    sim: Sim, caplog: pytest.LogCaptureFixture
) -> None:
    """The boundary's reply is the last thing that runs: when Discord refuses it (here, the
    interaction token is unknown, as when it expired) it is logged, never raised into
    discord.py, so the only error left is the one that was being answered."""
    sim.env.inject_error("POST", "/interactions/*/callback", status=404, code=10062, times=None)
    result = await sim.mod.slash(sim.staff, "event list")
    assert result.response is None
    (error,) = sim.env.errors
    assert getattr(getattr(error, "original", error), "code", None) == 10062
    assert any(
        r.name == "bot.errors" and r.getMessage().startswith("could not answer interaction")
        for r in caplog.records
    )
