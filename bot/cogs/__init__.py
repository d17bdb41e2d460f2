"""The bot's features, one package each (as python-discord's ``bot/exts/<feature>/``): what
members click and staff type (a cog or dynamic buttons, loaded as an extension), what the feature
posts and how it renders it, and the background loop that keeps it in step with the database.

- ``control``: ``/event`` for staff: start, pause, resume, cancel, status, health, publish;
- ``cues``: the GM's Confirm and Skip buttons on cue messages;
- ``signups``: the sign-up message and its buttons, promotions, departures, the Interested
  import, the event threads and the attendee roles;
- ``publishing``: an uploaded definition checked, previewed and published;
- ``staff_log``: the run log's lines in the staff channel;
- ``live``: one live message per run in the staff channel;
- ``events_tab``: scheduled occurrences mirrored to Discord's Events tab.

A package's modules with a leading underscore are its own; ``bot.app`` composes the features.
"""
