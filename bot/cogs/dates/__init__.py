"""One date of a recurring event: ``/event skip-date`` and ``/event move-date`` (issue 28).
Their commands join the ``/event`` group through ``_cog.DateCommands``, a base of
``bot.cogs.control._cog.EventCog``; what they change is the definition (``wiring.date_exceptions``)."""
