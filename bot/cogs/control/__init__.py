"""``/event`` for staff: start, pause, resume, cancel, status, health and publish, with the
preflight a start runs (the extension is ``_cog``)."""
