"""Sign-ups in Discord: the message and its buttons (the extension is ``_cog``), and the loops
that follow the lists: the message and promotion notices (``_messages``), members who left
(``_departures``), the Events tab's Interested members (``_import``), the event threads
(``_threads``) and the attendee roles (``_roles``, never one that is unsafe to hand out)."""
