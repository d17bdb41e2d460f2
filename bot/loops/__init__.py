"""The bot's background loops (``discord.ext.tasks``, through ``ticker.WakeableLoop``): the tick
that drives the runner (``ticker``), the live run messages (``live_runs``), the staff log
(``staff_log``) and the Events-tab mirror (``scheduled_events``), with the lease that lets only
one process sharing the database do each (``work_lease``).

Each is handed what it uses (a Discord client for its channels, the config, a store or a
service, the clock, the channel budget, its lease) by ``bot.app.EventBot``; none imports the bot.
"""
