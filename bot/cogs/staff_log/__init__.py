"""The run log's lines in the staff channel: one poster among processes, bursts summarised,
notices from the rest of the bot (``runner.bus.StaffNotice``)."""
