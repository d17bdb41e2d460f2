"""What a run's cleanup ledger shows staff (``runner.engine.cleanup``): how far a cancel's
cleanup got, what could not be undone, and what is theirs to undo by hand."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection

from runner.sql import undos as undos_sql
from runner.states import CleanupStatus, UndoStatus


@dataclass(frozen=True)
class CleanupView:
    status: CleanupStatus
    # Entries the runner undoes (every status but manual), and how many of them are done.
    automatic: int = 0
    undone: int = 0
    # Labels: undos that failed (with why), and entries to undo by hand.
    failed: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)


async def cleanup_view(conn: AsyncConnection, run_id: int, status: object) -> CleanupView:
    entries = await undos_sql.for_run(conn, run_id)
    automatic = [e for e in entries if e["status"] != UndoStatus.MANUAL]
    return CleanupView(
        status=CleanupStatus(str(status)) if status else CleanupStatus.NOT_REQUIRED,
        automatic=len(automatic),
        undone=sum(1 for e in automatic if e["status"] == UndoStatus.DONE),
        failed=[f"{e['label']}: {e['last_error']}" for e in automatic if e["status"] == UndoStatus.FAILED],
        manual=[str(e["label"]) for e in entries if e["status"] == UndoStatus.MANUAL],
    )


def cleanup_line(view: CleanupView) -> str:
    """One line for a status view: ``Cleanup: 2 of 3 undone; by hand: give the loot``."""
    head = {
        CleanupStatus.NOT_REQUIRED: "nothing undone yet (undone only by a cancel with cleanup)",
        CleanupStatus.PENDING: f"under way, {view.undone} of {view.automatic} undone",
        CleanupStatus.DONE: f"done, {view.undone} of {view.automatic} undone",
        CleanupStatus.FAILED: f"failed, {view.undone} of {view.automatic} undone",
    }[view.status]
    parts = [f"Cleanup: {head}"]
    if view.failed:
        parts.append("not undone: " + "; ".join(view.failed))
    if view.manual:
        parts.append("to undo by hand: " + ", ".join(view.manual))
    return ". ".join(parts)
