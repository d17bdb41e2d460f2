"""Reminders to attendees by direct message (a reminder written ``to: attendees``): the loop that
sends them (``_loop``), what the Discord delivery does when one falls due (``_queue``: it writes
the DMs to send, once per member), and ``/reminders on|off``, each member's own choice (the
extension is ``_cog``)."""
