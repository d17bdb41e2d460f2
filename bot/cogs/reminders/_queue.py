"""``Delivery.dm_attendees`` for the Discord delivery: a reminder to attendees that falls due is
written as one row per member to DM (``bridge.reminder_dms.queue``, once per member however often
it is performed), and the reminder loop sends them. Writing is quick, so the reminder's step is
settled at once however many members it reaches; the DMs follow within the loop's pass."""

from __future__ import annotations

from typing import Protocol

from actions.delivery import AttendeeDms, DeliveryError, DmsQueued


class DmQueue(Protocol):
    async def queue(self, request: AttendeeDms) -> DmsQueued: ...


class QueuesAttendeeDms:
    # The reminder loop (``bot.app`` sets it, as it sets the sign-up poster).
    attendee_dms: DmQueue | None = None

    async def dm_attendees(self, request: AttendeeDms) -> DmsQueued:
        if self.attendee_dms is None:
            raise DeliveryError("this bot process sends no reminders by DM yet", transient=True)
        return await self.attendee_dms.queue(request)
