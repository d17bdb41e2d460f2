"""Scheduled occurrences mirrored to Discord's Events tab (``bridge.listings`` decides what)."""
