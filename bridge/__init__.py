"""The services between the engine and Discord: Discord-shaped, but with no discord.py in them.

The engine (``runner``) runs events and keeps the store; a front end talks to its platform. In
between are the services that exist because the platform is Discord, yet are decided in the
database and tested without it:

- ``listings``: the Events-tab entry each scheduled occurrence should have, and which need
  pushing (the bot's ``scheduled_events`` sends them);
- ``live``: what a run's live message in the staff channel shows, who posts it, and where it is;
- ``exclusive``: work done once among several processes sharing one bot token: an interaction
  (any external event) claimed by its id, and named work leases for the loops;
- ``signup_messages``: a run's sign-up message (posted once across processes) and the promotion
  notices' outbox (claimed, delivered, settled once); the seats themselves are the engine's
  (``runner.signups``);
- ``threads`` and ``attendee_roles``: the event thread's members and the attendee role's
  holders, desired (the seats) against recorded (what Discord was asked to do);
- ``interested``: the Events tab's Interested members a run imports as sign-ups;
- ``sql``: their statements, one module per table group. The tables themselves are the store's
  (``runner.schema``): one schema and one migration history, and retention prunes them.

This package builds on ``runner``; ``runner`` never imports it, and it imports neither discord
nor ``bot`` (``tests/test_layers.py``).
"""
