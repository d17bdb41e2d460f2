"""A message posted once across processes: its row is written, claimed, before the post.

The live run message and the sign-up message are each one per run, and two bot processes (or a
booking and a step) may both set out to post it. Whoever writes the row first posts; the row's
primary key is the run, so the second INSERT is ignored and answers no row. The post then
carries a nonce derived from the run, so a repeat after a crash is answered by Discord with the
message already posted. A claimer that dies before storing the message id leaves the claim to
run out (each table's own statements take it over).
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from runner.db import insert_ignore


async def claim_first_post(
    conn: AsyncConnection,
    table: sa.Table,
    run_id: int,
    channel_id: str,
    owner: str,
    until: dt.datetime,
    now: dt.datetime,
) -> bool:
    """Write ``run_id``'s row in ``table`` claimed by ``owner`` until ``until``; False when it
    exists already (another process posts it, or did)."""
    result = await conn.execute(
        insert_ignore(conn, table).values(
            run_id=run_id,
            channel_id=channel_id,
            claimed_by=owner,
            claim_expires_at=until,
            created_at=now,
            updated_at=now,
        )
    )
    return result.rowcount == 1
