"""The one factory for event definitions in tests: the raw mapping staff write (what
``runner.definitions.validate`` and ``from_spec`` read), built from ``event``, ``phase`` and
``step``, so a field the definition format gains is filled in one place.

    event("raid", phase("main", step("core.wait", {"duration": 60})), scopes=["north"])

``step`` fails ``skip`` unless told otherwise, so a surprise failure in a test that is not about
failures shows up as a skipped step rather than a paused run; ``on_failure=None`` leaves the key
out (the format's own default). ``wait``, ``announce`` and ``cue`` are steps of the real actions.
"""

from __future__ import annotations

from typing import Any


def step(
    action: str,
    params: dict[str, Any] | None = None,
    *,
    on_failure: str | None = "skip",
    label: str | None = None,
) -> dict[str, Any]:
    raw: dict[str, Any] = {"action": action, "params": params or {}}
    if on_failure is not None:
        raw["on_failure"] = on_failure
    if label is not None:
        raw["label"] = label
    return raw


def phase(key: str, *steps: dict[str, Any], label: str | None = None) -> dict[str, Any]:
    return {"key": key, "label": label or key.title(), "steps": list(steps)}


def event(
    key: str = "event", *phases: dict[str, Any], title: str | None = None, **fields: Any
) -> dict[str, Any]:
    """An event; ``fields`` are its other top-level keys (``scopes``, ``schedule``,
    ``grace_seconds``, ``concurrency_key``, ...). With no phases, one ``main`` phase that waits."""
    return {
        "key": key,
        "title": title or key.replace("-", " ").title(),
        "phases": list(phases) or [phase("main", wait())],
        **fields,
    }


def wait(
    duration: int | float | str = 60, *, label: str | None = None, on_failure: str | None = None
) -> dict[str, Any]:
    return step("core.wait", {"duration": duration}, on_failure=on_failure, label=label)


def announce(
    content: str | None = "Hello",
    channel: str = "announcements",
    *,
    label: str | None = None,
    on_failure: str | None = None,
    **params: Any,
) -> dict[str, Any]:
    """``discord.announce``; ``params`` are its other params (``embed``, ``ping_role``)."""
    raw = {"channel": channel, **({"content": content} if content is not None else {}), **params}
    return step("discord.announce", raw, on_failure=on_failure, label=label)


def cue(
    instructions: str = "Open the gates",
    *,
    label: str | None = None,
    on_failure: str | None = None,
    **params: Any,
) -> dict[str, Any]:
    """``gm.cue``; ``params`` are its other params (``title``, ``channel``, ``ping_role``)."""
    return step("gm.cue", {"instructions": instructions, **params}, on_failure=on_failure, label=label)


def cron(expression: str, timezone: str = "UTC") -> dict[str, Any]:
    return {"cron": expression, "timezone": timezone}
