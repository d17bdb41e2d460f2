"""Actors stored as an id and a display name; a manual run holds no occurrence key.

* ``event_run_log.actor`` and ``event_run_steps.settled_by`` held one ``"name (id)"`` string
  that every front end took apart again with a regex. They become ``actor_id`` + ``actor_name``
  and ``settled_by_id`` + ``settled_by_name``; the old strings are split once, here (a string
  without a trailing ``(digits)`` is a name with no id: ``schedule``, ``cli``, ``rehearsal``).
* ``uq_evrun_occurrence`` moves from ``scheduled_for`` to a new ``occurrence_at``: the moment of
  the schedule a run is the occurrence of, and NULL for a manual start. Both backends let any
  number of NULLs through a unique index, so manual starts never collide (they used to dodge the
  key by shifting ``scheduled_for`` a microsecond at a time), while two runs of one scheduled
  occurrence are still refused by the database. Existing runs created by the schedule (started
  by ``schedule``) keep their occurrence; the rest were manual.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The label the bot wrote: ``f"{user.name} ({user.id})"[:100]`` (a Discord id is 15-21 digits).
_LABEL = re.compile(r"^(?P<name>.*) \((?P<id>[0-9]{15,21})\)$", re.DOTALL)


def _when() -> sa.types.TypeEngine[dt.datetime]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _split(label: str) -> tuple[str | None, str]:
    match = _LABEL.match(label)
    if match is None:
        return None, label
    return match["id"], match["name"]


def _join(actor_id: str | None, name: str) -> str:
    return (f"{name} ({actor_id})" if actor_id else name)[:100]


def _split_column(table: str, old: str, id_col: str, name_col: str) -> None:
    conn = op.get_bind()
    t = sa.table(table, sa.column("id"), sa.column(old), sa.column(id_col), sa.column(name_col))
    for row_id, label in conn.execute(sa.select(t.c.id, t.c[old]).where(t.c[old].is_not(None))).all():
        actor_id, name = _split(label)
        conn.execute(sa.update(t).where(t.c.id == row_id).values({id_col: actor_id, name_col: name}))


def _join_column(table: str, old: str, id_col: str, name_col: str) -> None:
    conn = op.get_bind()
    t = sa.table(table, sa.column("id"), sa.column(old), sa.column(id_col), sa.column(name_col))
    query = sa.select(t.c.id, t.c[id_col], t.c[name_col]).where(t.c[name_col].is_not(None))
    for row_id, actor_id, name in conn.execute(query).all():
        conn.execute(sa.update(t).where(t.c.id == row_id).values({old: _join(actor_id, name)}))


def _swap_occurrence_key(columns: list[str], *, drop: str | None = None) -> None:
    """Rebuild ``uq_evrun_occurrence`` over ``columns`` (dropping column ``drop`` with it)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        # SQLite changes a constraint by rebuilding the table, and dropping the old one with
        # foreign keys on (they cannot be turned off inside the migration's transaction) would
        # orphan every step. The steps step aside while the runs are rebuilt.
        op.execute("CREATE TEMP TABLE steps_0004 AS SELECT * FROM event_run_steps")
        op.execute("DELETE FROM event_run_steps")
    # MariaDB's foreign key on ``definition_id`` may be using the occurrence key as its index and
    # refuses to let it go; a plain index holds the foreign key while the key is rebuilt.
    op.create_index("tmp_evrun_definition", "event_runs", ["definition_id"])
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.drop_constraint("uq_evrun_occurrence", type_="unique")
        batch_op.create_unique_constraint("uq_evrun_occurrence", columns)
        if drop is not None:
            batch_op.drop_column(drop)
    op.drop_index("tmp_evrun_definition", table_name="event_runs")
    if sqlite:
        op.execute("INSERT INTO event_run_steps SELECT * FROM steps_0004")
        op.execute("DROP TABLE steps_0004")


# The "name (id)" label columns and the id + name pairs that replace them.
_ACTOR_COLUMNS = (
    ("event_run_log", "actor", "actor_id", "actor_name"),
    ("event_run_steps", "settled_by", "settled_by_id", "settled_by_name"),
)


def upgrade() -> None:
    for table, old, id_col, name_col in _ACTOR_COLUMNS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(id_col, sa.String(length=64), nullable=True))
            batch_op.add_column(sa.Column(name_col, sa.String(length=100), nullable=True))
        _split_column(table, old, id_col, name_col)
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(old)

    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("occurrence_at", _when(), nullable=True))
    op.execute("UPDATE event_runs SET occurrence_at = scheduled_for WHERE started_by = 'schedule'")
    _swap_occurrence_key(["definition_id", "scope", "occurrence_at"])


def downgrade() -> None:
    # Manual runs that share an instant with another run of their event and scope cannot all
    # come back under the old key: each is moved on a microsecond, as the manual start used to.
    conn = op.get_bind()
    runs = sa.table(
        "event_runs",
        sa.column("id"),
        sa.column("definition_id"),
        sa.column("scope"),
        # Typed, so SQLite's text reads back as (and is written from) datetimes.
        sa.column("scheduled_for", sa.DateTime()),
        sa.column("occurrence_at", sa.DateTime()),
    )
    taken: set[tuple[object, object, object]] = set()
    rows = conn.execute(
        sa.select(
            runs.c.id, runs.c.definition_id, runs.c.scope, runs.c.scheduled_for, runs.c.occurrence_at
        ).order_by(runs.c.occurrence_at.is_(None), runs.c.id)
    ).all()
    for run_id, definition_id, scope, moment, occurrence in rows:
        shifted = moment
        while (definition_id, scope, shifted) in taken:
            shifted = shifted + dt.timedelta(microseconds=1)
        taken.add((definition_id, scope, shifted))
        if occurrence is None and shifted != moment:
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(scheduled_for=shifted))
    _swap_occurrence_key(["definition_id", "scope", "scheduled_for"], drop="occurrence_at")

    for table, old, id_col, name_col in reversed(_ACTOR_COLUMNS):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(old, sa.String(length=100), nullable=True))
        _join_column(table, old, id_col, name_col)
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(name_col)
            batch_op.drop_column(id_col)
