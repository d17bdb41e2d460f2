"""The reminders to attendees, sent by direct message, in a loop of their own
(``bot.background.LeasedLoop``, woken when this process writes a reminder's DMs, else at its
interval), under the ``reminder-dms`` work lease so one process sends. It is not woken by every
tick: a pass takes the lease and reads the outbox, which a burst of hundreds of runs starting at
once (each drive a wake) would pay for nothing.

Each row (``bridge.reminder_dms``: one per member and reminder, written when the reminder fell
due) is claimed, then sent as promotion notices are (``bot.cogs.signups._dm``): by DM, or, when
the member's DMs are closed (Discord's 50007), by a mention of them alone in the channel of the
run's sign-up message; then settled, once. The DM carries a nonce of its row, so one sent again
after a crash between the send and the settle is answered by Discord with the first.
"""

from __future__ import annotations

from actions import limits
from actions.delivery import AttendeeDms, DmsQueued
from bot.background import LeasedLoop
from bot.cogs.signups._dm import dm_or_mention
from bot.rendering import clip
from bridge import reminder_dms

# Under every reminder: how to stop them, in Discord's small grey text.
HOW_TO_STOP = "\n-# /reminders off: no more event reminders by DM"


def dm_text(content: str) -> str:
    return clip(content, limits.CONTENT_MAX - len(HOW_TO_STOP)) + HOW_TO_STOP


class AttendeeReminders(LeasedLoop):
    work = "reminder-dms"
    # A reminder falls due in a tick, or in a drive outside it: both end with ``LogGrew``.
    wakes_on = (reminder_dms.AttendeeDmsQueued,)

    async def queue(self, request: AttendeeDms) -> DmsQueued:
        """The DMs of a reminder that fell due, written to be sent (any process may write them:
        each is written once); this loop sends them at its next pass."""
        seq = request.context.step_index if request.context is not None else 0
        members, off = await reminder_dms.queue(
            self.kit.engine,
            request.run_id,
            seq,
            request.step_id,
            request.members,
            request.content,
            self.kit.clock.now(),
        )
        if members:
            self.kit.bus.publish(reminder_dms.AttendeeDmsQueued(request.run_id))
        return DmsQueued(members, off)

    async def work_once(self) -> float | None:
        """Send what is due; pass again at once while there was some (a batch at a time)."""
        claimed = await reminder_dms.claim_due(self.kit.engine, self.kit.owner, self.kit.clock.now())
        for dm in claimed:
            text = dm_text(dm.content)
            via, error = await dm_or_mention(
                self.kit, dm.run_id, int(dm.member_id), text, nonce=reminder_dms.nonce(dm)
            )
            if error is not None:
                self.refusals.log_once(
                    ("dm", dm.id), f"reminder DM to member {dm.member_id} (run {dm.run_id}): {error}"
                )
            await reminder_dms.settle(
                self.kit.engine, dm, self.kit.owner, self.kit.clock.now(), via=via, error=error
            )
        return 0.0 if claimed else None
