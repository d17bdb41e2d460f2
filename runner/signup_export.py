"""The sign-up list of a run as CSV, for staff to attach in Discord (issue 28 item 3).

Spreadsheets run a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and some a tab or
carriage return) as a formula, and member names are typed by members: such a cell is prefixed
with a quote so it is read as text (OWASP's advice against CSV injection).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.sql import signups as sql

HEADER = ("member_id", "member_name", "option", "state", "position", "joined_at", "attendance")
_FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    text = "" if value is None else str(value)
    if text.startswith(_FORMULA_LEADS):
        return "'" + text
    return text


def _when(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat(timespec="seconds") if value.tzinfo else value.isoformat()
    return "" if value is None else str(value)


def csv_text(rows: Sequence[Mapping[Any, Any]], attendance: Mapping[str, str] | None = None) -> str:
    marks = attendance or {}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(HEADER)
    for row in rows:
        status = row["status"]
        writer.writerow(
            [
                safe_cell(row["member_id"]),
                safe_cell(row["member_name"]),
                safe_cell(row["option"]),
                safe_cell(getattr(status, "value", status)),
                safe_cell(row["position"]),
                safe_cell(_when(row["joined_at"])),
                safe_cell(marks.get(str(row["member_id"]), "")),
            ]
        )
    return out.getvalue()


async def export_run(conn: AsyncConnection, run_id: int, attendance: Mapping[str, str] | None = None) -> str:
    # Cancelled rows are kept: staff exporting after an event want to see who dropped out.
    rows = await sql.for_run(conn, run_id, with_cancelled=True)
    return csv_text(rows, attendance)
