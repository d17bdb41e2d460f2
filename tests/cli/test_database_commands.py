"""``migrate``, ``publish`` and ``runs``: the commands that touch the configured database."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from cli.common import shown_url
from runner import views
from runner.schema import definitions, versions
from tests.cli.conftest import EXAMPLE_FILES, EXAMPLES, Cli, on_database, sqlite_url, write_yaml
from tests.support.definitions import event, phase, step

INVASION = EXAMPLES / "invasion.yaml"


@pytest.fixture
def database(cli: Cli, tmp_path: Path) -> str:
    """A migrated SQLite database of the test's own."""
    url = sqlite_url(tmp_path / "eventbot.sqlite3")
    assert cli("migrate", "--database", url).code == 0
    return url


def stored_versions(url: str) -> list[tuple[str, int]]:
    async def read(engine: sa.ext.asyncio.AsyncEngine) -> list[tuple[str, int]]:
        query = (
            sa.select(definitions.c.key, versions.c.version)
            .join(definitions, definitions.c.id == versions.c.definition_id)
            .order_by(definitions.c.key, versions.c.version)
        )
        async with engine.connect() as conn:
            return [(row.key, row.version) for row in await conn.execute(query)]

    return on_database(url, read)


# ── migrate ────────────────────────────────────────────────────────────────


def test_migrate_creates_the_schema_and_can_run_again(cli: Cli, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "fresh.sqlite3")
    first = cli("migrate", "--database", url)
    assert first.code == 0
    assert f"database {url} is at revision " in first.out
    assert (tmp_path / "fresh.sqlite3").exists()
    again = cli("migrate", "--database", url)
    assert again.code == 0 and again.out == first.out


def test_the_environment_overrides_the_config_file(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EVENTBOT_DATABASE_URL wins over database_url in the file; --database wins over both."""
    from_file = tmp_path / "from-file.sqlite3"
    from_env = tmp_path / "from-env.sqlite3"
    from_flag = tmp_path / "from-flag.sqlite3"
    write_yaml(tmp_path / "config.yaml", {"database_url": sqlite_url(from_file)})
    monkeypatch.setenv("EVENTBOT_DATABASE_URL", sqlite_url(from_env))
    assert cli("migrate").code == 0
    assert from_env.exists() and not from_file.exists()
    assert cli("migrate", "--database", sqlite_url(from_flag)).code == 0
    assert from_flag.exists() and not from_file.exists()


def test_config_yaml_in_the_working_directory_is_read_by_default(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "configured.sqlite3"
    write_yaml(tmp_path / "config.yaml", {"database_url": sqlite_url(target)})
    assert cli("migrate").code == 0
    assert target.exists()


def test_an_unsupported_database_url_is_a_usage_error(cli: Cli) -> None:
    result = cli("migrate", "--database", "postgresql+asyncpg://u:hunter2@db/eventbot")
    assert result.code == 2
    assert result.err.startswith("error: --database: ") and "unsupported backend 'postgresql'" in result.err
    assert "hunter2" not in result.err + result.out


def test_a_sqlite_file_in_a_missing_directory_is_refused_before_connecting(cli: Cli, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "no-such-dir" / "x.sqlite3")
    result = cli("migrate", "--database", url)
    assert result.code == 1
    assert (
        result.err
        == f"error: cannot use the database at {url}: the directory {tmp_path / 'no-such-dir'} does not exist\n"
    )


def test_a_database_that_cannot_be_opened_is_one_line_not_a_traceback(cli: Cli, tmp_path: Path) -> None:
    """SQLite cannot open a directory as a database: the failure comes from the driver itself."""
    (tmp_path / "a-directory").mkdir()
    url = sqlite_url(tmp_path / "a-directory")
    result = cli("migrate", "--database", url)
    assert result.code == 1
    assert result.err.startswith(f"error: cannot use the database at {url}: unable to open database file")
    assert "Traceback" not in result.err


def test_printed_urls_never_show_the_password() -> None:
    shown = shown_url("mysql+asyncmy://eventbot:s3cret@db.example.org/eventbot")
    assert "s3cret" not in shown and "eventbot:***@db.example.org" in shown


# ── publish ────────────────────────────────────────────────────────────────


def test_publish_before_migrate_says_what_to_do(cli: Cli, tmp_path: Path) -> None:
    result = cli("publish", INVASION, "--database", sqlite_url(tmp_path / "empty.sqlite3"))
    assert result.code == 1
    assert "has no eventbot tables yet: run `python -m bot migrate` first" in result.err


def test_publishing_the_same_content_twice_stores_nothing_new(
    cli: Cli, database: str, tmp_path: Path
) -> None:
    first = cli("publish", INVASION, "--database", database)
    assert first.code == 0
    assert first.out == f"published shadow-invasion v1 ({INVASION})\n"
    second = cli("publish", INVASION, "--database", database)
    assert second.code == 0
    assert second.out == f"unchanged shadow-invasion v1 ({INVASION})\n"
    assert stored_versions(database) == [("shadow-invasion", 1)]

    edited = tmp_path / "invasion.yaml"
    edited.write_text(INVASION.read_text().replace("Defenders, to your posts.", "To the gates!"))
    third = cli("publish", edited, "--database", database)
    assert third.out == f"published shadow-invasion v2 ({edited})\n"
    assert stored_versions(database) == [("shadow-invasion", 1), ("shadow-invasion", 2)]


def test_an_invalid_file_means_nothing_is_published(cli: Cli, database: str, tmp_path: Path) -> None:
    """All or nothing: publishing half of a set of events is how a live event goes out broken."""
    bad = write_yaml(
        tmp_path / "bad.yaml",
        event("bad", phase("p", step("x.y", on_failure=None))),
    )
    result = cli("publish", INVASION, bad, "--database", database)
    assert result.code == 1
    assert "phase 'p', 1st step, field 'action': unknown action 'x.y'" in result.out
    assert "nothing was published" in result.out
    assert stored_versions(database) == []


def test_publish_with_no_files_publishes_the_definitions_dir(cli: Cli, database: str, tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    for example in EXAMPLE_FILES:
        shutil.copy(example, events / example.name)
    write_yaml(tmp_path / "config.yaml", {"database_url": database, "definitions_dir": str(events)})
    result = cli("publish")
    assert result.code == 0, result.err
    assert sorted(line.split()[1] for line in result.lines) == [
        "quiz-night",
        "raid-night",
        "shadow-invasion",
        "treasure-hunt",
    ]
    assert all(line.startswith("published ") for line in result.lines)


def test_publish_with_no_files_and_no_definitions_dir_explains(cli: Cli, database: str) -> None:
    result = cli("publish", "--database", database)
    assert result.code == 1
    assert "definitions_dir 'events' is not a directory" in result.err


# ── runs ───────────────────────────────────────────────────────────────────


def test_runs_on_a_missing_sqlite_file_does_not_create_one(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "missing.sqlite3"
    result = cli("runs", "--database", sqlite_url(target))
    assert result.code == 1
    assert "run `python -m bot migrate` first" in result.err
    assert not target.exists()


def test_runs_lists_what_is_in_flight_and_with_all_what_has_ended(cli: Cli, database: str) -> None:
    assert cli("runs", "--database", database).lines[0] == "no runs in flight (--all shows finished ones too)"
    assert cli("rehearse", INVASION, "--database", database).code == 0
    assert "no runs in flight" in cli("runs", "--database", database).out

    listed = cli("runs", "--all", "--database", database)
    assert listed.code == 0
    header, *rows, counts = listed.lines
    assert counts == "3 runs: 0 scheduled (not started yet), 0 under way, 3 ended"
    assert header.split()[:6] == ["ID", "EVENT", "SCOPE", "STATUS", "HEALTH", "PHASE"]
    assert len(rows) == 3
    for row, scope in zip(rows, ("celestia", "borealis", "aurora"), strict=True):  # newest first
        cells = row.split()
        assert cells[1:6] == ["shadow-invasion", scope, "completed", "ok", "closing"]
        assert "rehearsal" in cells


def test_runs_json_is_one_object_per_run(cli: Cli, database: str) -> None:
    assert cli("rehearse", INVASION, "--scope", "aurora", "--database", database).code == 0
    records = [json.loads(line) for line in cli("runs", "--all", "--json", "--database", database).lines]
    assert [(r["definition_key"], r["scope"], r["status"], r["rehearsal"]) for r in records] == [
        ("shadow-invasion", "aurora", "completed", True)
    ]


def test_runs_shows_a_run_stopped_at_a_cue_as_in_flight(
    cli: Cli, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert cli("rehearse", EXAMPLES / "treasure-hunt.yaml", "--cues", "ask", "--database", database).code == 1
    summaries = on_database(database, lambda engine: views.list_runs(engine, in_flight_only=True))
    assert [(s.definition_key, s.status) for s in summaries] == [("treasure-hunt", "running")]
    row = cli("runs", "--database", database).lines[1].split()
    assert row[1:6] == ["treasure-hunt", "-", "running", "ok", "hunt"]


def test_runs_lists_a_run_whose_history_retention_pruned_as_before(cli: Cli, database: str) -> None:
    """Retention deletes an old run's steps and log lines and keeps its row: ``runs --all``
    shows it exactly as it did before, and ``--json`` too."""
    from runner.clock import ManualClock, utcnow
    from runner.engine import Runner, RunnerSettings
    from runner.registry import ActionRegistry
    from runner.schema import run_log

    assert cli("rehearse", INVASION, "--scope", "aurora", "--database", database).code == 0
    before = cli("runs", "--all", "--database", database)
    json_before = cli("runs", "--all", "--json", "--database", database).out

    async def prune(engine: sa.ext.asyncio.AsyncEngine) -> int:
        runner = Runner(
            engine,
            ActionRegistry(),
            clock=ManualClock(utcnow() + dt.timedelta(days=31)),
            settings=RunnerSettings(keep_run_log_seconds=30 * 86400.0),
        )
        report = await runner.tick()
        assert not report.errors and report.pruned > 0
        async with engine.connect() as conn:
            return int((await conn.execute(sa.select(sa.func.count()).select_from(run_log))).scalar() or 0)

    assert on_database(database, prune) == 1, "every line pruned but the table's newest"
    assert cli("runs", "--all", "--database", database).lines == before.lines
    assert cli("runs", "--all", "--json", "--database", database).out == json_before
