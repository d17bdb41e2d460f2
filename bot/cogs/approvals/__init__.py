"""Approvals: a step whose action's risk waits for staff, its card and its Approve and Skip
buttons (the extension is ``_cog``)."""
