"""Actions from other packages: plugins, found through the ``eventbot.actions`` entry-point group.

An entry point names a callable that takes a ``PluginStaging`` and registers its actions there
(``staging.register([...])``), as a built-in module stages its own; the staging also hands it
the registry's delivery and step describer, for an action that posts to Discord. Plugins are
staged after the built-ins, each on its own, and checked as they are. One that cannot be
imported, raises while registering, stages a malformed action, or names an action a built-in or
another plugin also names registers nothing at all (both of two plugins that claim one id: which
one would win depends on the order packages were installed in). Its problems are kept on the
registry (``ActionRegistry.refused``) for ``health`` and the start-up log; the bot runs on
without it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from actions.delivery import Delivery
from actions.messaging import Describe
from runner.registry import ActionRegistry, Staging

GROUP = "eventbot.actions"
# A plugin's own error text is cut to this: a problem is one short line.
REASON_MAX = 200


@dataclass(kw_only=True)
class PluginStaging(Staging):
    """What a plugin's entry point is called with: ``register`` its actions here. ``delivery``
    and ``describe`` are those the built-in actions were given (Discord's in the bot, the
    console's in a rehearsal, a recording one when definitions are only checked)."""

    delivery: Delivery
    describe: Describe


@dataclass(frozen=True)
class Plugin:
    """One entry point of the group, as found: its name and the package it came from."""

    name: str
    package: str
    entry_point: EntryPoint

    @property
    def owner(self) -> str:
        """How listings and problems name it: ``plugin dice (eventbot-example-dice 0.1.0)``."""
        return f"plugin {self.name}" + (f" ({self.package})" if self.package else "")


def discover() -> list[Plugin]:
    """Every entry point in the group, in a stable order (by name, then package)."""
    found = []
    for point in entry_points(group=GROUP):
        dist = point.dist
        package = f"{dist.name} {dist.version}" if dist is not None else ""
        found.append(Plugin(point.name, package, point))
    return sorted(found, key=lambda p: (p.name, p.package))


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 1] + "…"


def _staged(plugin: Plugin, delivery: Delivery, describe: Describe) -> PluginStaging | str:
    """The plugin's staging, or the one problem that kept it from staging anything."""
    try:
        hook = plugin.entry_point.load()
    # A plugin's import may fail any way at all, sys.exit() included; the bot runs on.
    except (Exception, SystemExit) as exc:
        return f"{plugin.owner}: could not be imported: {_reason(exc)}"
    if not callable(hook):
        return f"{plugin.owner}: {plugin.entry_point.value} is not callable (it must take the staging)"
    staging = PluginStaging(plugin.owner, delivery=delivery, describe=describe)
    try:
        hook(staging)
    except (Exception, SystemExit) as exc:
        return f"{plugin.owner}: raised while registering: {_reason(exc)}"
    return staging


def _ids(staging: Staging) -> set[str]:
    return {i for i in (getattr(a, "id", None) for a in staging.staged) if isinstance(i, str)}


def stage_plugins(registry: ActionRegistry, delivery: Delivery, describe: Describe) -> None:
    """Stage every plugin installed into ``registry``; each one refused registers nothing, and
    its problems are added to ``registry.refused``."""
    stagings: list[PluginStaging] = []
    for plugin in discover():
        staged = _staged(plugin, delivery, describe)
        if isinstance(staged, str):
            registry.refused.append(staged)
        else:
            stagings.append(staged)
    claims = Counter(i for s in stagings for i in _ids(s))
    for staging in stagings:
        contested = sorted(i for i in _ids(staging) if claims[i] > 1)
        if contested:
            others = [s.owner for s in stagings if s is not staging and _ids(s) & set(contested)]
            registry.refused.append(
                f"{staging.owner}: action {', '.join(contested)} is also registered by {', '.join(others)}"
            )
            continue
        try:
            registry.offer(staging)
        except Exception as exc:  # an entry too malformed even to check (an unhashable id)
            registry.refused.append(f"{staging.owner}: could not be checked: {_reason(exc)}")
