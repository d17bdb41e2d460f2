"""Events written and changed from Discord: ``/event create`` from a template, ``/event edit`` of
the common fields, ``/event export`` of the YAML (the extension is ``_cog``, the form ``_form``).
What they produce is checked, previewed and published by ``bot.cogs.publishing``."""
