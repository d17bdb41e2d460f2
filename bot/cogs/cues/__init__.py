"""The GM's cue messages and their Confirm and Skip buttons (the extension is ``_cog``)."""
